# trainbook's two commands (see README.md):
#   make demo   set up if needed, then run the main job
#   make test   set up if needed, then run every test (Rust tests, multi-rank tests, notebooks)
.PHONY: setup demo lint test gpu-test torch-2.11-check
SHELL := /bin/bash

setup:
	bash scripts/setup.sh

demo: setup
	python3 data-scripts/mnist.py data/mnist
	cargo run --release --example mnist

# The style gate (part of `make test`): formatting, clippy on every target, and the API docs
# built without a warning (broken links, undocumented public items).
lint: setup
	cargo fmt --check
	cargo clippy --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" cargo doc --no-deps

# On CI (a clean clone, built once) incremental-compilation caches only cost disk (~1.4 GB).
test: setup lint
	set -o pipefail; mkdir -p target; if [ -n "$$CI" ]; then export CARGO_INCREMENTAL=0; fi; cargo test --no-fail-fast 2>&1 | tee target/test.log
	@awk '/^test result:/ { p += $$4; f += $$6 } END { printf "all tests: %d passed, %d failed\n", p, f }' target/test.log

# The GPU suite (tests/gpu.rs) with NCCL: on a machine with a CUDA GPU it trains against PyTorch
# on that GPU; elsewhere every test prints SKIPPED. Not part of `make test` (which still builds
# and runs the suite without the cuda feature, so it always compiles).
gpu-test: setup
	cargo test --features cuda --test gpu -- --nocapture --test-threads=1

# trainbook against a second PyTorch (2.11.0, the version GPU machines often carry, with tch
# 0.24): builds it and runs the kernel-level tests against it. Heavy (~5 GB venv, a second
# build), so not part of `make test`.
torch-2.11-check:
	TORCH=2.11.0 TCH=0.24 CUDA_TOOLKIT=13.0.2 bash scripts/check-torch-version.sh
