#!/usr/bin/env bash
# Runs every Rust test of the checkout: what `make test` runs after the set-up and the lint (the
# Makefile then sums its output into one line, "all tests: P passed, F failed").
#
# With cargo-nextest on the machine (the CI machines have it; `cargo install cargo-nextest`
# elsewhere) the test binaries run side by side as .config/nextest.toml says, then the
# doctests with `cargo test --doc` (nextest does not run doctests). Without it, plain
# `cargo test`, one binary after another: the same tests, slower. TRAINBOOK_TESTS=cargo forces
# the latter.
set -uo pipefail
cd "$(dirname "$0")/.."

status=0
# Skipped tests leave their reason here (tests/common/mod.rs, `skip`); counted at the end.
skipped_dir=target/tmp/skipped
rm -rf "$skipped_dir"
nextest=$(cargo nextest --version 2>/dev/null | head -1)
if [ "${TRAINBOOK_TESTS:-}" != cargo ] && [ -n "$nextest" ]; then
  echo "run-tests: $nextest, then the doctests"
  # Tests side by side share the 2 cores: libtorch's OpenMP threads sleep while they wait (two
  # test processes pairing up ran in 37 s instead of 43 s here; spinning, no faster than one
  # after the other). It costs a test running alone: notebook 03 took 148 s instead of 123 s.
  OMP_WAIT_POLICY=PASSIVE cargo nextest run --no-fail-fast 2>&1 || status=1
  cargo test --doc --no-fail-fast 2>&1 || status=1
else
  why="cargo-nextest not found"
  [ -n "$nextest" ] && why="TRAINBOOK_TESTS=cargo"
  echo "run-tests: cargo test, one binary after another ($why)"
  cargo test --no-fail-fast 2>&1 || status=1
fi
# What the build scripts' compiler cache saved (scripts/setup/c++-via-sccache), when it is in use.
# (A CXX of the caller's own replaces the wrapper: nothing to report then.)
if [ -z "${CXX:-}" ] && stats=$(scripts/setup/c++-via-sccache --sccache --show-stats 2>/dev/null); then
  grep -E '^(Compile requests|Cache (hits|misses)) ' <<<"$stats" |
    sed 's/^/compiler cache (sccache, since its server started): /'
fi
# Which tests skipped, and why: only where this machine cannot host them (no GPU, no root, no
# network); the Makefile's last line adds the count.
skips=$(cat "$skipped_dir"/*.txt 2>/dev/null | sort)
echo "run-tests: $(grep -c . <<<"$skips") tests skipped on this machine${skips:+:}"
[ -n "$skips" ] && sed 's/^/  SKIPPED /' <<<"$skips"
exit $status
