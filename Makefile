# trainbook's two commands (see README.md):
#   make demo   set up if needed, then run the main job
#   make test   set up if needed, then run every test (Rust tests, multi-rank tests, notebooks)
.PHONY: setup demo test
SHELL := /bin/bash

setup:
	bash scripts/setup.sh

demo: setup
	cargo build --release --bin c10d-check
	.venv/bin/torchrun --standalone --nproc-per-node=2 --no-python target/release/c10d-check

test: setup
	cargo test --no-fail-fast
