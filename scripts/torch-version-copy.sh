# Sourced by scripts/check-torch-version.sh and scripts/gpu-bundle.sh: a venv with a second
# PyTorch and a copy of this working tree whose Cargo.toml binds it, ready for cargo.
#
# GPU machines often carry PyTorch 2.11, which tch 0.26 cannot compile against (its generated
# bindings name ops added later); tch/torch-sys 0.24 bind 2.11.0. trainbook's code compiles
# with both, so only the two versions in a copy of Cargo.toml change.
#
# In: TORCH (default 2.11.0), TCH (0.24), CUDA_TOOLKIT (13.0.2), ROOT (the checkout).
# Makes .venv-torch$TORCH once (~5 GB: torch, torchvision, the CUDA headers the `cuda`
# feature compiles against) and $WORK/src (the tracked files of ROOT); exports LIBTORCH,
# CARGO_TARGET_DIR=$WORK/target and the rest of what .cargo/config.toml would set, and cds
# into the copy.
TORCH=${TORCH:-2.11.0}
TCH=${TCH:-0.24}
CUDA_TOOLKIT=${CUDA_TOOLKIT:-13.0.2}
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
