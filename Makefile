# trainbook's two commands (see README.md; the book in docs/ has the rest: make docs):
#   make demo   set up what the demo needs, then run the main job
#   make test   set up everything, then run every test at CI size (lint, Rust tests, multi-rank
#               tests, doctests, notebooks with short settings); make test-long: the long runs
# No root (and no apt-get) needed: without it, scripts/setup/setup.sh unpacks the Debian packages
# the build needs into .venv/debs (scripts/setup/fetch-debs.sh, or scripts/setup/fetch_debs.py
# without apt) and says what it had to skip.
# On CI (a clean clone, built once) incremental-compilation caches only cost time and disk (~1.4
# GB): off for the lint's and the tests' builds. (The notebook kernels' builds keep evcxr's own
# setting: scripts/kernel/kernel-slots.sh.)
ifdef CI
export CARGO_INCREMENTAL = 0
endif

SHELL := /bin/bash
.DEFAULT_GOAL := help
.PHONY: help kernel-times class-times setup setup-demo setup-notebook workspace setup-repl repl test-repl demo lint test test-long test-timings notebooks docs gpu-test torch-2.11-check gpu-bundle gpu-bundle-cpu

## help: this list (`make` alone)
help:
	@echo "trainbook: make demo (the main job) and make test (every proof at CI size; make test-long: the long runs). All the targets:"
	@sed -n 's/^## \([a-z0-9.-]*\): /  \1	/p' $(firstword $(MAKEFILE_LIST)) | expand -t 20

## setup: install everything `make test` needs (idempotent)
# Everything `make test` needs: the tests' Python packages (torchvision, Ray, Dask, ...), Debian
# packages (Gloo headers, font, npm, openmpi-bin), evcxr_jupyter, the kernelspec and evcxr_repl.
setup:
	bash scripts/setup/setup.sh

## setup-demo: install what `make demo` and `make lint` need: torch, libtorch link, Gloo headers, font
# Only what `make demo` needs: torch in .venv, the libtorch link, Gloo headers, the plots' font.
setup-demo:
	bash scripts/setup/setup.sh --demo

## setup-notebook: setup-demo plus Jupyter, evcxr_jupyter, the kernel "Rust (trainbook)", its cache and the examples the notebooks run
# The notebooks: setup-demo plus the Python packages, evcxr_jupyter (a one-time build of ~10
# minutes), the Jupyter kernel "Rust (trainbook)", the prebuilt kernel cache (what `:dep
# trainbook` compiles; TRAINBOOK_KERNEL_CACHE=DIR builds a shared one for a class) and the
# examples notebooks 02, 04, 05 and 06 start (release builds). On a GPU node, TRAINBOOK_CUDA=1
# builds the examples and the kernel cache's `:dep` line with the `cuda` feature.
setup-notebook:
	bash scripts/setup/setup.sh --notebook

## workspace: a student's own folder on the class's checkout: make workspace DIR=~/trainbook [SHARE=K/N | GPUS=0,1] [THREADS=T] [NAME=ann]
# A student's copies of the notebooks (their `:dep` line naming this checkout), their own runs/,
# the class's data linked and their share of the GPUs and cores (SHARE=K/N: student K of N;
# GPUS: these; THREADS: libtorch's CPU threads);
# writes nothing in the checkout, so it works on a read-only one (scripts/notebooks/workspace.py).
workspace:
	@test -n "$(DIR)" || { echo "make workspace: DIR=... names the student's folder, e.g. make workspace DIR=~/trainbook" >&2; exit 2; }
	python3 scripts/notebooks/workspace.py "$(DIR)" $(if $(SHARE),--share "$(SHARE)") $(if $(GPUS),--gpus "$(GPUS)") $(if $(THREADS),--threads "$(THREADS)") $(if $(NAME),--name "$(NAME)")

## setup-repl: setup-demo plus evcxr_repl
# The evcxr REPL: setup-demo plus evcxr_repl (the same version as evcxr_jupyter; a one-time
# build of 10+ minutes on 2 cores).
setup-repl:
	bash scripts/setup/setup.sh --repl

## repl: evcxr's REPL with trainbook's environment
# evcxr's Rust REPL with trainbook's environment (scripts/kernel/trainbook-repl); start with
# `:dep trainbook = { path = "." }`. Figures are saved under runs/repl-figures/.
repl: setup-repl
	TRAINBOOK_FIGURES=runs/repl-figures scripts/kernel/trainbook-repl

## demo: the main job: MNIST, then examples/mnist
# setup-demo, MNIST, then examples/mnist; the first time, cargo compiles what does not need
# libtorch while pip installs torch (scripts/demo.sh).
demo:
	bash scripts/demo.sh

## lint: rustfmt, import circles, clippy on every target, rustdoc without warnings
# The style gate (part of `make test`): formatting, no import circle between src/'s folders and
# no new one between its files (scripts/dev/import_circles.py against its committed baseline),
# clippy on every target, and the API docs built without a warning (broken links, undocumented
# public items). It needs only what cargo needs (setup-demo: torch, the Gloo headers), not the
# notebooks' or the launchers' set-up.
lint: setup-demo
	cargo fmt --check
	python3 scripts/dev/import_circles.py --check scripts/dev/import_circles.baseline
	cargo clippy --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" cargo doc --no-deps

## test: every proof at CI size: set-up, lint, Rust tests, multi-rank tests, doctests, notebooks (short settings)
# Ends with the phases' times and the ten slowest tests (scripts/dev/test_timings.py). The runs
# whose proof needs length are in test-long.
test:
	@mkdir -p target; rm -f target/test-phases.tsv
	scripts/dev/phase.sh setup $(MAKE) --no-print-directory setup
	scripts/dev/phase.sh lint $(MAKE) --no-print-directory lint
	@set -o pipefail; bash scripts/run-tests.sh 2>&1 | tee target/test.log; status=$$?; \
	python3 scripts/dev/test_timings.py || true; \
	awk '/^test result:/ { p += $$4; f += $$6 } /^ *Summary \[/ { for (i = 1; i <= NF; i++) { if ($$i ~ /^passed/) p += $$(i-1); if ($$i ~ /^failed/) f += $$(i-1) } } /^run-tests: [0-9]+ tests skipped/ { s = $$2 } END { printf "all tests: %d passed, %d failed (of the passed, %d skipped on this machine: see above)\n", p, f, s }' target/test.log; \
	exit $$status

## test-long: the long tier: notebooks at their committed settings, full accuracy runs, REPL drive, bundle on the CPU
# The tests named long_* (ignored by make test, which keeps a shorter form of each):
# scripts/run-long-tests.sh. SHARD=k/N runs one of N shards (.ci/run runs one after make test,
# chosen by the commit count, so every long test runs at least once every N landings).
test-long: setup
	@mkdir -p target
	set -o pipefail; bash scripts/run-long-tests.sh $(SHARD) 2>&1 | tee target/test-long.log

## test-timings: make test with every Python process accounted, then the tables of docs/src/contributing.md
# make test with TRAINBOOK_PY_ACCOUNT set (each Python process the tests start records its CPU
# time: scripts/dev/pyaccount/), then the phases, the slowest tests and the Python processes as
# markdown tables (scripts/dev/test_timings.py --markdown).
test-timings:
	TRAINBOOK_PY_ACCOUNT=$(CURDIR)/target/py-account $(MAKE) --no-print-directory test
	python3 scripts/dev/test_timings.py --markdown --top 15

## docs: build the book (docs/, mdBook) into docs/book; open docs/book/index.html
# The book: install mdbook if missing (scripts/setup/setup.sh --docs, a one-time build of about a
# minute), then build it. `make test` builds it too and checks its links and claims
# (tests/tooling/docs_claims.rs).
docs:
	bash scripts/setup/setup.sh --docs
	"$${CARGO_HOME:-$$HOME/.cargo}/bin/mdbook" build docs

## notebooks: run every notebook headless and commit-ready (outputs written back)
# Runs every notebook headless and writes the executed notebooks, outputs included, back into
# notebooks/ (committed, so the plots show on a code host; tests/tooling/notebook_outputs.rs fails
# when a committed cell was not executed or was edited since). The notebooks start the prebuilt
# examples.
notebooks: setup-notebook
	cargo build --examples
	.venv/bin/python scripts/notebooks/run_notebooks.py --in-place

## kernel-times: time a notebook kernel's first :dep trainbook and a warm one
# What a notebook user waits for: a new slot's first `:dep trainbook` + one cell (seeded from
# the kernel cache) and a warm kernel's, after STUDENTS new users (default 3, a class) open one
# at the same moment; figures in target/bench/notebook_kernel.json.
STUDENTS ?= 3
kernel-times: setup-notebook
	.venv/bin/python scripts/kernel/kernel_cache.py time --students $(STUDENTS)

## class-times: each notebook run by STUDENTS (default 3) workspaces at the same moment
# What a class on one node waits for: every notebook at its committed settings, run by STUDENTS
# student workspaces at once; figures in target/bench/class_times.json.
class-times: setup-notebook
	.venv/bin/python scripts/notebooks/class_times.py --students $(STUDENTS)

## gpu-test: the GPU suites with NCCL (SKIP without a GPU)
# The GPU suites (tests/gpu.rs, tests/gpu_ranks.rs) with NCCL: on a machine with a CUDA GPU
# they train against PyTorch on that GPU; elsewhere every test prints SKIPPED. Not part of
# `make test` (which still builds and runs them without the cuda feature, so they always compile).
gpu-test: setup
	cargo test --features cuda --test gpu --test gpu_ranks -- --nocapture --test-threads=1

## torch-2.11-check: build and test against a second PyTorch (2.11.0)
# trainbook against a second PyTorch (2.11.0, the version GPU machines often carry, with tch
# 0.24): builds it and runs the kernel-level tests against it. Heavy (~5 GB venv, a second
# build), so not part of `make test`.
torch-2.11-check:
	TORCH=2.11.0 TCH=0.24 CUDA_TOOLKIT=13.0.2 bash scripts/gpu/check-torch-version.sh

## gpu-bundle: build the GPU bundle in target/gpu-bundle/
# The GPU bundle (scripts/gpu/gpu-bundle.sh): a release build against torch 2.11.0 (tch 0.24) with
# the cuda feature, stripped, in target/gpu-bundle/ (at most 64 MiB): copy it to a machine with
# a CUDA GPU and a Python with torch 2.11 + torchvision (no Rust needed there) and run
# `target/gpu-bundle/run.sh REPORT_DIR /path/to/python3` (target/gpu-bundle.tgz holds the same,
# gzipped, for copies with a size limit). Heavy (a second venv and build), so
# not part of `make test`, which builds and runs a dev bundle of the default torch instead
# (tests/gpu_bundle.rs).
gpu-bundle: setup
	bash scripts/gpu/gpu-bundle.sh

## gpu-bundle-cpu: the dev bundle's run.sh with its examples on the CPU (minutes)
# tests/gpu_bundle.rs's ignored test: builds the dev bundle as `make test` does and runs run.sh with
# TRAINBOOK_BUNDLE_DEVICE=cpu, so the examples' invocations of the GPU run (flags, data paths,
# two torchrun processes) are tried without a GPU. Minutes of training (both passes of run.sh,
# then one test, took 252 s on a 2-core EPYC without AVX-512, the build already done), so not
# in `make test`.
gpu-bundle-cpu: setup
	cargo test --test gpu_bundle -- --ignored --nocapture

## test-repl: drive the evcxr REPL (~30 min on 2 cores)
# The REPL drive (tests/tooling/repl.rs, ignored by make test: the evcxr_repl build and a cold
# trainbook build inside evcxr take ~30 minutes on 2 cores).
test-repl: setup-repl
	cargo test --test tooling -- --include-ignored repl::
