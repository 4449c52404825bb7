#!/usr/bin/env bash
# scripts/demo.sh (`make demo`): sets up only what the demo needs (scripts/setup/setup.sh --demo),
# gets MNIST and trains the course's CNN (examples/mnist). Extra arguments go to the example.
#
# The first time, while pip installs torch (minutes, mostly download), cargo already compiles
# the crates that do not need libtorch, in the background (`--keep-going`: torch-sys cannot
# build before the venv's libtorch is there, most crates beside it can; its output goes to
# target/demo-prebuild.log). pip installs CMake (libjpeg-turbo's build) and torch's own wheel
# first and torch's CUDA libraries (~3 GB, needed only to run the program) in the background;
# once torch's wheel is in, that compile is stopped (what it finished is kept) and the real
# build starts at once with torch-sys's C++ wrapper, the longest chain (torch-sys, tch, the
# shim, trainbook), instead of waiting for the rest; MNIST is fetched meanwhile.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
say() { printf '[demo] %s\n' "$*"; }

prebuild=""
stop_prebuild() {
  if [ -n "$prebuild" ]; then
    # The whole process group (cargo and its compilers), as Ctrl-C would: cargo keeps every
    # crate it finished. KILL if it is still there after 20 seconds.
    local waited=0
    while kill -0 "$prebuild" 2>/dev/null; do
      case $waited in
        0) kill -TERM -- "-$prebuild" 2>/dev/null || kill -TERM "$prebuild" 2>/dev/null || true ;;
        200) kill -KILL -- "-$prebuild" 2>/dev/null || kill -KILL "$prebuild" 2>/dev/null || true ;;
      esac
      sleep 0.1
      waited=$((waited + 1))
    done
    wait "$prebuild" 2>/dev/null || true
    prebuild=""
  fi
}
trap stop_prebuild EXIT

if [ ! -e .venv/libtorch ] && command -v cargo >/dev/null 2>&1; then
  target_dir=${CARGO_TARGET_DIR:-$ROOT/target}
  mkdir -p "$target_dir"
  log="$target_dir/demo-prebuild.log"
  say "compiling the crates that do not need libtorch while torch installs (log: $log)"
  # In its own process group (setsid), so that stop_prebuild reaches the compilers too.
  setsid=()
  command -v setsid >/dev/null 2>&1 && setsid=(setsid)
  "${setsid[@]}" cargo build --release --example mnist --keep-going >"$log" 2>&1 </dev/null &
  prebuild=$!
fi

# A first set-up installs torch's own wheel (its headers and libraries) and returns; torch's CUDA
# libraries, which only the finished program loads, install in the background meanwhile
# (scripts/setup/setup.sh, TRAINBOOK_SETUP_REST_IN_BACKGROUND): the status file below receives
# pip's exit status.
rest=""
if [ -n "$prebuild" ]; then
  rest="$target_dir/demo-pip-rest"
  rm -f "$rest" "$rest.log"
fi
TRAINBOOK_SETUP_REST_IN_BACKGROUND=$rest bash scripts/setup/setup.sh --demo

if [ -n "$prebuild" ]; then
  say "torch is in: stopping the background compile, building what needs libtorch"
  stop_prebuild
fi
# Waits for the background pip, if one was started, and checks the whole install.
wait_for_rest() {
  [ -n "$rest" ] && [ -e "$rest.log" ] || return 0
  if [ ! -e "$rest" ]; then
    say "waiting for pip to finish installing torch's CUDA libraries (log: $rest.log)"
    while [ ! -e "$rest" ]; do sleep 0.5; done
  fi
  [ "$(cat "$rest")" = 0 ] || { cat "$rest.log" >&2; say "error: pip install -r scripts/setup/requirements-demo.txt failed (above; log: $rest.log)"; exit 1; }
  rest=""
  bash scripts/setup/setup.sh --demo
}
python3 data-scripts/mnist.py data/mnist &
mnist=$!
build_ok=0
cargo build --release --example mnist || build_ok=$?
if [ "$build_ok" != 0 ] && [ -n "$rest" ] && [ ! -e "$rest" ]; then
  # The link came before torch's CUDA libraries were in (a slow download): once they are, only
  # the link is left to do.
  wait_for_rest
  say "building again now that torch's CUDA libraries are in"
  build_ok=0
  cargo build --release --example mnist || build_ok=$?
fi
mnist_ok=0
wait "$mnist" || mnist_ok=$?
[ "$build_ok" = 0 ] || { say "error: cargo build failed (see above)"; exit "$build_ok"; }
[ "$mnist_ok" = 0 ] || { say "error: data-scripts/mnist.py data/mnist failed (see above)"; exit "$mnist_ok"; }
wait_for_rest
cargo run --release --example mnist -- "$@"
