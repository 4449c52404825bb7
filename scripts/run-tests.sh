#!/usr/bin/env bash
# Runs every Rust test of the checkout: what `make test` runs after the set-up and the lint (the
# Makefile then sums its output into one line, "all tests: P passed, F failed").
#
# With cargo-nextest on the machine (the CI machines have it; `cargo install cargo-nextest`
# elsewhere) the test binaries run side by side as .config/nextest.toml says, then the
# doctests with `cargo test --doc` (nextest does not run doctests). Without it, plain
# `cargo test`, one binary after another: the same tests, slower. TRAINBOOK_TESTS=cargo forces
# the latter. Each phase's time goes to target/test-phases.tsv (scripts/dev/phase.sh); with
# TRAINBOOK_PY_ACCOUNT=DIR (`make test-timings`) every Python process the tests start records its
# CPU time there (scripts/dev/pyaccount/sitecustomize.py).
set -uo pipefail
cd "$(dirname "$0")/.."

status=0
if [ -n "${TRAINBOOK_PY_ACCOUNT:-}" ]; then
  rm -rf "$TRAINBOOK_PY_ACCOUNT"
  mkdir -p "$TRAINBOOK_PY_ACCOUNT"
  export PYTHONPATH="$PWD/scripts/dev/pyaccount${PYTHONPATH:+:$PYTHONPATH}"
fi
# Skipped tests leave their reason here (tests/common/mod.rs, `skip`); counted at the end.
skipped_dir=target/tmp/skipped
rm -rf "$skipped_dir"
nextest=$(cargo nextest --version 2>/dev/null | head -1)
phase() { scripts/dev/phase.sh "$@"; }

# The oracle server (scripts/dev/oracle_server.py): PyTorch's side of the parity tests, the
# scripts of tests/oracle/, forked from one Python that imported torch and torchvision once,
# instead of a new Python importing them for every call. The tests find its client through
# TRAINBOOK_ORACLE_PYTHON (tests/common/mod.rs, `venv_bin("python")`). TRAINBOOK_ORACLE_SERVER=0
# runs every oracle in a Python of its own, as a lone `cargo test` does.
oracle_server=""
start_oracle_server() {
  [ "${TRAINBOOK_ORACLE_SERVER:-1}" != 0 ] || { echo "run-tests: the oracle server is off (TRAINBOOK_ORACLE_SERVER=0)"; return 0; }
  local dir="$PWD/target/oracle-server" python="$PWD/.venv/bin/python"
  [ -x "$python" ] || return 0
  rm -rf "$dir"
  mkdir -p "$dir"
  # The tests' environment, as the oracles had it when each was a child of its test.
  OMP_WAIT_POLICY=PASSIVE "$python" scripts/dev/oracle_server.py serve "$dir/socket" >"$dir/server.log" 2>&1 &
  oracle_server=$!
  local waited=0
  until [ -S "$dir/socket" ]; do
    if ! kill -0 "$oracle_server" 2>/dev/null || [ $waited -ge 1200 ]; then
      echo "run-tests: error: the oracle server did not start:" >&2
      cat "$dir/server.log" >&2
      status=1
      return 1
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  printf '#!/bin/bash\nexec %q -I -S %q client %q %q "$@"\n' "$python" "$PWD/scripts/dev/oracle_server.py" \
    "$python" "$dir/socket" >"$dir/python"
  chmod +x "$dir/python"
  export TRAINBOOK_ORACLE_PYTHON="$dir/python"
  head -1 "$dir/server.log" | sed 's/^/run-tests: /'
}
stop_oracle_server() {
  [ -n "$oracle_server" ] || return 0
  kill "$oracle_server" 2>/dev/null
  wait "$oracle_server" 2>/dev/null
  oracle_server=""
}
trap stop_oracle_server EXIT
if [ "${TRAINBOOK_TESTS:-}" != cargo ] && [ -n "$nextest" ]; then
  echo "run-tests: $nextest, then the doctests"
  # The builds first, each on both cores and before any test holds a slot: the test binaries
  # (what nextest would build), then the builds some tests start themselves, so that no test
  # waits in its slot for cargo's lock on target/: the GPU suite with `cuda` where libtorch has
  # its CUDA libraries (tests/cuda_feature.rs and the dev GPU bundle, tests/gpu_bundle.rs, share
  # it) and the bundle's GPU bench (built without the feature, as the dev bundle builds it).
  phase "test build" cargo test --no-run --message-format short 2>&1 || status=1
  if [ -e .venv/libtorch/lib/libtorch_cuda.so ]; then
    phase "cuda build (GPU suite)" cargo build --features cuda --test gpu --message-format short 2>&1 || status=1
  fi
  phase "bench build (GPU bundle)" cargo build --bench gpu --message-format short 2>&1 || status=1
  # Tests side by side share the 2 cores: libtorch's OpenMP threads sleep while they wait (two
  # test processes pairing up ran in 37 s instead of 43 s here; spinning, no faster than one
  # after the other). It costs a test running alone: notebook 03 took 148 s instead of 123 s.
  start_oracle_server
  phase nextest env OMP_WAIT_POLICY=PASSIVE cargo nextest run --no-fail-fast 2>&1 || status=1
  phase doctests cargo test --doc --no-fail-fast 2>&1 || status=1
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
