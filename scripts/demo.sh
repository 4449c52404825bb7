#!/usr/bin/env bash
# scripts/demo.sh (`make demo`): sets up only what the demo needs (scripts/setup.sh --demo),
# gets MNIST and trains the course's CNN (examples/mnist). Extra arguments go to the example.
#
# The first time, while pip installs torch (a minute or two, mostly download), cargo already
# compiles the crates that do not need libtorch, in the background (`--keep-going`: torch-sys
# cannot build until the venv's libtorch is there, everything beside it can). Its output goes
# to target/demo-prebuild.log; the real build follows and reuses what it compiled.
set -euo pipefail
set -m # background jobs in their own process group, so that one can be stopped whole

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
say() { printf '[demo] %s\n' "$*"; }

prebuild=""
stop_prebuild() {
  if [ -n "$prebuild" ] && kill -0 "$prebuild" 2>/dev/null; then
    kill -TERM -- "-$prebuild" 2>/dev/null || true
    wait "$prebuild" 2>/dev/null || true
  fi
}
trap stop_prebuild EXIT

if [ ! -e .venv/libtorch ] && command -v cargo >/dev/null 2>&1; then
  target_dir=${CARGO_TARGET_DIR:-$ROOT/target}
  mkdir -p "$target_dir"
  log="$target_dir/demo-prebuild.log"
  say "compiling the crates that do not need libtorch while torch installs (log: $log)"
  cargo build --release --example mnist --keep-going >"$log" 2>&1 &
  prebuild=$!
fi

bash scripts/setup.sh --demo
python3 data-scripts/mnist.py data/mnist

if [ -n "$prebuild" ]; then
  # It fails where torch-sys ran before libtorch was there; the build below redoes that part.
  if kill -0 "$prebuild" 2>/dev/null; then
    say "waiting for the background compile (pid $prebuild) to finish"
  fi
  wait "$prebuild" 2>/dev/null || true
  prebuild=""
fi
cargo run --release --example mnist -- "$@"
