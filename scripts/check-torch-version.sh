#!/usr/bin/env bash
# Builds trainbook against a second PyTorch and runs, against it, the tests that exercise
# libtorch through trainbook's shim (autocast, GradScaler, fused/foreach optimizers,
# channels_last, the training loop, models and optimizers against torch/torchvision, the GPU
# suite, which skips without a GPU), then checks that the `cuda` feature compiles against it.
#
# GPU machines often carry PyTorch 2.11, which tch 0.26 cannot compile against (its generated
# bindings name ops added later); tch/torch-sys 0.24 bind 2.11.0. trainbook's code compiles
# with both, so this only rewrites the two versions in a copy of Cargo.toml.
#
#   TORCH=2.11.0 TCH=0.24 CUDA_TOOLKIT=13.0.2 scripts/check-torch-version.sh   (the defaults)
#
# Uses .venv-torch$TORCH (made once, ~5 GB) and target/torch-$TORCH/ (a copy of the tracked
# files of this working tree, and its build).
set -euo pipefail
TORCH=${TORCH:-2.11.0}
TCH=${TCH:-0.24}
CUDA_TOOLKIT=${CUDA_TOOLKIT:-13.0.2}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=$ROOT/.venv-torch$TORCH
WORK=$ROOT/target/torch-$TORCH
say() { echo "[torch-$TORCH] $*"; }

if ! "$VENV/bin/python" -c "import torch, sys; sys.exit(not torch.__version__.startswith('$TORCH'))" 2>/dev/null; then
    say "creating $VENV (torch==$TORCH, torchvision, CUDA headers)"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q "torch==$TORCH" torchvision safetensors numpy "cuda-toolkit[nvcc,cccl]==$CUDA_TOOLKIT" ||
        { echo "pip install failed: is PyPI reachable?" >&2; exit 1; }
fi
LIBTORCH=$("$VENV/bin/python" -c "import os, torch; print(os.path.dirname(torch.__file__))")

say "copying the tracked files of $ROOT to $WORK/src (tch and torch-sys $TCH)"
rm -rf "$WORK/src"
mkdir -p "$WORK/src"
(cd "$ROOT" && git ls-files -z | tar --null -T - -cf -) | tar -xf - -C "$WORK/src"
cd "$WORK/src"
sed -i -E "s/^(tch|torch-sys) = \"[0-9.]+\"/\1 = \"$TCH\"/" Cargo.toml
grep -E '^(tch|torch-sys) = ' Cargo.toml
rm -f Cargo.lock

export LIBTORCH LIBTORCH_CXX11_ABI=1 TRAINBOOK_VENV=$VENV CARGO_TARGET_DIR=$WORK/target
# The copy's .cargo/config.toml points at its own (missing) .venv: CMake and NASM for
# libjpeg-turbo come from the checkout's.
export CMAKE=$ROOT/.venv/bin/cmake CMAKE_PROGRAM_PATH=$ROOT/.venv/bin
say "cargo test against $("$VENV/bin/python" -c 'import torch; print(torch.__version__)') at $LIBTORCH"
cargo test --lib --test amp --test memory_format --test training_loop --test models_parity --test gpu
say "cargo check --features cuda"
cargo check --features cuda --lib --test gpu
say "trainbook builds and passes against torch $TORCH with tch $TCH"
