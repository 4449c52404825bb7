#!/usr/bin/env bash
# scripts/gpu/gpu-bundle.sh [--dev OUT]: builds the GPU bundle, a folder that runs every GPU check
# of trainbook on a Linux machine with a CUDA GPU and a Python with torch and torchvision, but
# no Rust toolchain and no network (a cluster's compute node; the GPU machines this project
# borrows). Copy the folder there and run `./run.sh REPORT_DIR [PYTHON]` (see
# scripts/gpu/bundle/run.sh).
#
#   make gpu-bundle       release build against torch 2.11.0 with tch 0.24 and the `cuda`
#                         feature (as `make torch-2.11-check` builds), stripped, into
#                         target/gpu-bundle/ (at most 64 MiB). TORCH/TCH/CUDA_TOOLKIT pick
#                         another PyTorch (scripts/gpu/torch-version-copy.sh).
#   --dev OUT             the checkout's own build (the set-up's torch, dev profile) into OUT,
#                         unstripped: what tests/gpu_bundle.rs builds in `make test` to run
#                         run.sh on the CPU. The GPU suite is built with `cuda` where the
#                         libtorch has libtorch_cuda (the build tests/cuda_feature.rs makes), the
#                         other binaries without (the test build's own examples and gpu_ranks),
#                         so the dev bundle reuses what `make test` compiles anyway (only the
#                         GPU suite reads the feature: tests/cuda_feature.rs keeps that true).
#
# The bundle: run.sh; bin/ (the GPU suites tests/gpu.rs and tests/gpu_ranks.rs, benches/gpu.rs
# as gpu-bench, the examples mnist, designsafe, tiny_imagenet and dogs); tests/oracle/ and
# benches/pytorch_gpu.py (PyTorch's sides) and benches/trace_summary.py (the profile, per step); scripts/bench/bench_records.py (the bench's figures as a record); data-scripts/designsafe_standin.py (the
# benchmark's data, drawn there); data/mnist/*.gz; fonts/DejaVuSans.ttf (the figures'); MANIFEST.json (commit, torch,
# tch, profile, features).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
MODE=release
OUT=$ROOT/target/gpu-bundle
case "${1:-}" in
  "") ;;
  --dev) MODE=dev; OUT=${2:?usage: $0 [--dev OUT]} ;;
  *) echo "usage: $0 [--dev OUT]" >&2; exit 2 ;;
esac
LIMIT_MIB=64
start=$(date +%s)
bundle_say() { echo "[gpu-bundle] $*"; }
commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo true || echo false)

TARGETS=(--examples --test gpu --test gpu_ranks --bench gpu)
if [ "$MODE" = release ]; then
  . "$ROOT/scripts/gpu/torch-version-copy.sh"   # cds into the copy bound to torch $TORCH
  FEATURES=cuda
  PROFILE_ARGS=(--release)
  TORCH_BUILT=$TORCH
  TCH_BUILT=$TCH
  PY=$VENV/bin/python
else
  cd "$ROOT"
  PY=$ROOT/.venv/bin/python
  [ -x "$PY" ] || { echo "no .venv: run make setup first" >&2; exit 1; }
  LIB=$("$PY" -c "import os, torch; print(os.path.join(os.path.dirname(torch.__file__), 'lib'))")
  GPU_SUITE_FEATURES=$([ -e "$LIB/libtorch_cuda.so" ] && echo cuda || echo "")
  PROFILE_ARGS=()
  TORCH_BUILT=$("$PY" -c "import torch; print(torch.__version__.split('+')[0])")
  TCH_BUILT=$(sed -n -E 's/^tch = "([0-9.]+)"/\1/p' Cargo.toml)
fi

messages=$(mktemp)
trap 'rm -f "$messages"' EXIT
build() { # FEATURES TARGETS...
  bundle_say "cargo build ${PROFILE_ARGS[*]} --features '$1' ${*:2} (torch $TORCH_BUILT, tch $TCH_BUILT)"
  cargo build "${PROFILE_ARGS[@]}" --features "$1" "${@:2}" --message-format json-render-diagnostics >>"$messages"
}
if [ "$MODE" = release ]; then
  build "$FEATURES" "${TARGETS[@]}"
else
  build "$GPU_SUITE_FEATURES" --test gpu
  build "" --examples --test gpu_ranks --bench gpu
  FEATURES="gpu suite: ${GPU_SUITE_FEATURES:-none}, others: none"
fi

rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/tests" "$OUT/benches" "$OUT/data/mnist"
# The executables cargo reports: tests and the bench by target name, examples by name.
"$PY" - "$messages" "$OUT/bin" "$MODE" <<'PYEOF'
import json, os, shutil, subprocess, sys
messages, dest, mode = sys.argv[1:4]
names = {("test", "gpu"): "gpu", ("test", "gpu_ranks"): "gpu_ranks", ("bench", "gpu"): "gpu-bench"}
for ex in ("mnist", "designsafe", "tiny_imagenet", "dogs"):
    names[("example", ex)] = ex
found = {}
for line in open(messages):
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    for kind in m["target"]["kind"]:
        name = names.get((kind, m["target"]["name"]))
        if name:
            found[name] = m["executable"]
missing = sorted(set(names.values()) - set(found))
if missing:
    sys.exit(f"cargo built no executable for {missing}")
for name, exe in sorted(found.items()):
    out = os.path.join(dest, name)
    if mode == "release":
        subprocess.run(["strip", "-o", out, exe], check=True)
    else:
        try:
            os.link(exe, out)  # same file system: no copy of the unstripped binaries
        except OSError:
            shutil.copy2(exe, out)
PYEOF

cp -r "$ROOT/tests/oracle" "$OUT/tests/oracle"
rm -rf "$OUT/tests/oracle/__pycache__"
cp "$ROOT/benches/pytorch_gpu.py" "$ROOT/benches/trace_summary.py" "$OUT/benches/"
mkdir -p "$OUT/scripts/bench"
cp "$ROOT/scripts/bench/bench_records.py" "$OUT/scripts/bench/"
mkdir -p "$OUT/data-scripts"
cp "$ROOT/data-scripts/designsafe_standin.py" "$OUT/data-scripts/"
install -m 0755 "$ROOT/scripts/gpu/bundle/run.sh" "$OUT/run.sh"
# The figures' font (compute nodes often lack fonts-dejavu-core; DejaVu's licence lets it be
# copied): run.sh points TRAINBOOK_FONT at it unless the caller set one.
for f in ${TRAINBOOK_FONT:+"$TRAINBOOK_FONT"} /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf \
         "$ROOT/.venv/debs/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"; do
  if [ -f "$f" ]; then
    mkdir -p "$OUT/fonts" && cp "$f" "$OUT/fonts/DejaVuSans.ttf"
    break
  fi
done

# MNIST (the compute node has no network): built here once by data-scripts/mnist.py, shipped
# gzipped (trainbook's and torchvision's readers both read .gz).
MNIST=$ROOT/data/mnist
if [ ! -e "$MNIST/t10k-labels-idx1-ubyte" ] && [ ! -e "$MNIST/t10k-labels-idx1-ubyte.gz" ]; then
  bundle_say "building MNIST in $MNIST (data-scripts/mnist.py)"
  "$ROOT/.venv/bin/python" "$ROOT/data-scripts/mnist.py" "$MNIST"
fi
"$PY" - "$MNIST" "$OUT/data/mnist" <<'PYEOF'
import gzip, os, shutil, sys
src, dest = sys.argv[1:3]
for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
    if os.path.exists(os.path.join(src, name + ".gz")):
        shutil.copy(os.path.join(src, name + ".gz"), dest)
        continue
    with open(os.path.join(src, name), "rb") as f, open(os.path.join(dest, name + ".gz"), "wb") as out:
        with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as z:
            shutil.copyfileobj(f, z)
PYEOF

cat >"$OUT/MANIFEST.json" <<EOF
{"commit": "$commit", "uncommitted_changes": $dirty, "torch": "$TORCH_BUILT", "tch": "$TCH_BUILT",
 "profile": "$MODE", "features": "$FEATURES", "built": "$(date -u +%Y-%m-%dT%H:%M:%SZ)"}
EOF

size=$(du -sbL "$OUT" | cut -f1)
mib=$(( (size + 1048575) / 1048576 ))
bundle_say "wrote $OUT: $mib MiB in $(( $(date +%s) - start )) s"
ls -la "$OUT/bin"
if [ "$MODE" = release ] && [ "$mib" -gt "$LIMIT_MIB" ]; then
  echo "[gpu-bundle] error: the bundle is $mib MiB, over the $LIMIT_MIB MiB a GPU machine's copy allows" >&2
  exit 1
fi
# Also as one gzipped tar beside it (about 40% of the size): what travels when the bundle and
# the checkout together would exceed a copy's limit (`tar -xzf gpu-bundle.tgz` there).
if [ "$MODE" = release ]; then
  tar -C "$(dirname "$OUT")" -czf "$OUT.tgz" "$(basename "$OUT")"
  bundle_say "wrote $OUT.tgz: $(( ($(stat -c %s "$OUT.tgz") + 1048575) / 1048576 )) MiB"
fi
