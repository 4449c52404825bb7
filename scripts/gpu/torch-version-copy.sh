# Sourced by scripts/gpu/check-torch-version.sh and scripts/gpu/gpu-bundle.sh: a venv with a second
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
# The copy is staged, then only files whose contents differ are written into $WORK/src, with the
# current time: cargo decides freshness by modification times, and a file carrying its original
# (older) time could be older than a build of the copy that used its previous contents, so the
# change would go unseen (it happened: a shim function missing from a bundle's link).
# Unchanged files keep their times, so cargo rebuilds only what changed.
# A copy made the old way (every file with its original time) cannot be trusted: start afresh.
[ -e "$WORK/src/.copied-by-content" ] || rm -rf "$WORK/src"
rm -rf "$WORK/src.staged"
mkdir -p "$WORK/src.staged" "$WORK/src"
(cd "$ROOT" && git ls-files -z | tar --null -T - -cf -) | tar -xf - -C "$WORK/src.staged"
sed -i -E "s/^(tch|torch-sys) = \"[0-9.]+\"/\1 = \"$TCH\"/" "$WORK/src.staged/Cargo.toml"
rm -f "$WORK/src.staged/Cargo.lock"
python3 - "$WORK/src.staged" "$WORK/src" <<'PY'
import filecmp, os, shutil, sys
staged, dest = sys.argv[1:]
wanted = set()
for dirpath, _, files in os.walk(staged):
    rel = os.path.relpath(dirpath, staged)
    os.makedirs(os.path.join(dest, rel), exist_ok=True)
    for name in files:
        src, dst = os.path.join(dirpath, name), os.path.join(dest, rel, name)
        wanted.add(os.path.normpath(os.path.join(rel, name)))
        if not (os.path.isfile(dst) and filecmp.cmp(src, dst, shallow=False)):
            if os.path.lexists(dst):
                os.remove(dst)
            shutil.copyfile(src, dst)
            shutil.copymode(src, dst)
for dirpath, _, files in os.walk(dest, topdown=False):
    for name in files:
        path = os.path.join(dirpath, name)
        kept = name in ("Cargo.lock", ".copied-by-content")
        if os.path.normpath(os.path.relpath(path, dest)) not in wanted and not kept:
            os.remove(path)
PY
rm -rf "$WORK/src.staged"
touch "$WORK/src/.copied-by-content"
cd "$WORK/src"
grep -E '^(tch|torch-sys) = ' Cargo.toml

# torch-sys prefers the Python's torch to LIBTORCH when LIBTORCH_USE_PYTORCH is set (tch's
# README suggests it), which would be the set-up venv's: this copy builds against $LIBTORCH.
unset LIBTORCH_USE_PYTORCH
export LIBTORCH LIBTORCH_CXX11_ABI=1 TRAINBOOK_VENV=$VENV CARGO_TARGET_DIR=$WORK/target
# The copy's .cargo/config.toml points at its own (missing) .venv: CMake and NASM for
# libjpeg-turbo come from the checkout's.
export CMAKE=$ROOT/.venv/bin/cmake CMAKE_PROGRAM_PATH=$ROOT/.venv/bin
