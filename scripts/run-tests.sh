#!/usr/bin/env bash
# Runs every Rust test of the checkout (what `make test` runs after the set-up and the lint) and
# ends with one line: "all tests: P passed, F failed".
#
# With cargo-nextest on the machine (the CI machines have it; `cargo install cargo-nextest`
# elsewhere) the test binaries run side by side as .config/nextest.toml says, then the
# doctests with `cargo test --doc` (nextest does not run doctests). Without it, plain
# `cargo test`, one binary after another: the same tests, slower. TRAINBOOK_TESTS=cargo forces
# the latter.
set -uo pipefail
cd "$(dirname "$0")/.."

status=0
if [ "${TRAINBOOK_TESTS:-}" != cargo ] && cargo nextest --version >/dev/null 2>&1; then
  echo "run-tests: cargo nextest ($(cargo nextest --version 2>/dev/null | head -1)), then the doctests"
  # Tests side by side share the 2 cores: libtorch's OpenMP threads sleep while they wait (two
  # test processes pairing up ran in 37 s instead of 43 s here; spinning, no faster than one
  # after the other).
  OMP_WAIT_POLICY=PASSIVE cargo nextest run --no-fail-fast 2>&1 || status=1
  cargo test --doc --no-fail-fast 2>&1 || status=1
else
  echo "run-tests: cargo test (cargo-nextest not found: the binaries run one after another)"
  cargo test --no-fail-fast 2>&1 || status=1
fi
exit $status
