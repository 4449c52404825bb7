#!/usr/bin/env bash
# run.sh REPORT_DIR [PYTHON]: every GPU check of trainbook, from the GPU bundle that
# scripts/gpu/gpu-bundle.sh (`make gpu-bundle`) builds. Needs a Linux machine with a CUDA GPU and a
# Python with torch (the version the bundle was built against: MANIFEST.json) and
# torchvision; no Rust, no network. PYTHON defaults to $PYTHON, then python3.
#
# Writes REPORT_DIR/report.txt (every check's output) and REPORT_DIR/report.json (each check's
# status and seconds, the benchmark's figures from REPORT_DIR/gpu.json, the bundle's manifest).
# Scratch data and runs go to REPORT_DIR/work. Exit status: 0 when every check asked for ran and
# none failed (without a GPU every check says SKIPPED), 1 otherwise.
#
# The checks, each with its own time limit (890 s in all; a run that passes takes far less):
#   gpu-suite    bin/gpu: float32 and bf16 steps against PyTorch, the loader's batches on the
#                GPU, current device and NCCL group, seeding, GradScaler, exact resume in the
#                deterministic mode, the CUDA generator's state, the step as a CUDA graph
#                against the eager step (bit for bit, train_epoch and fit with a resume),
#                a TorchScript module trained by fit against PyTorch, ResNet34 img/s
#   gpu-ranks    bin/gpu_ranks: 2 torchrun processes sharing the GPU over Gloo with CUDA
#                tensors (Ddp against one process; reproducible twice; the step as a CUDA
#                graph against the eager step); thread ranks refused
#   mnist, mnist-torchrun-2, designsafe, tiny_imagenet, dogs
#                the examples on the GPU on small data (the stand-ins generated here; MNIST
#                shipped in data/mnist); mnist also as 2 torchrun processes sharing the GPU, with
#                the step as a CUDA graph (DDP's all-reduce after each replay)
#   bench        bin/gpu-bench: ResNet34 step (batch 16/64, float32 and bf16+channels_last;
#                trainbook eager and as a CUDA graph, PyTorch eager, with cudnn.benchmark,
#                under torch.cuda.graph and torch.compile) img/s and peak memory, the DesignSafe epoch and the JPEG loader with 4/8/16
#                workers, against PyTorch in the same run (writes REPORT_DIR/gpu.json, and
#                its record for benches/results: REPORT_DIR/records/gpu/KIND.json)
#
# Two variables for a machine lent by the minute:
#   TRAINBOOK_BUNDLE_CHECKS    the checks to run, in that order, by the names above
#                              (default: all, in the order above), e.g. "bench gpu-suite"
#   TRAINBOOK_BUNDLE_DEADLINE  seconds the whole run may take: each check's limit is cut to
#                              what is left (less 15 s for the report), a check with under 30 s
#                              left is not started (status "not-run"), and report.json is
#                              written either way. A check not run makes the exit status 1.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { sed -n '2,6p' "$0"; exit 2; }
mkdir -p "$1" || exit 2
REPORT=$(cd "$1" && pwd)
PY=${2:-${PYTHON:-python3}}
command -v "$PY" >/dev/null 2>&1 || { echo "run.sh: no Python at '$PY' (give one with torch)" >&2; exit 2; }
TORCH_LIB=$("$PY" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))') ||
  { echo "run.sh: $PY cannot import torch" >&2; exit 2; }
WORK=$REPORT/work
mkdir -p "$WORK/tmp"
export LD_LIBRARY_PATH="$TORCH_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TRAINBOOK_PYTHON="$PY" TRAINBOOK_REPO="$HERE" TRAINBOOK_TEST_TMPDIR="$WORK/tmp"
# torchrun beside that Python (trainbook::programs finds it there), else on PATH.
export PATH="$(dirname "$PY"):$PATH"
# cuBLAS's fixed workspace, which the deterministic mode needs before CUDA starts.
export CUBLAS_WORKSPACE_CONFIG=${CUBLAS_WORKSPACE_CONFIG:-:4096:8}
export RUST_BACKTRACE=1
# The figures' font shipped in the bundle, unless the caller names one.
[ -z "${TRAINBOOK_FONT:-}" ] && [ -f "$HERE/fonts/DejaVuSans.ttf" ] && export TRAINBOOK_FONT="$HERE/fonts/DejaVuSans.ttf"

ALL_CHECKS="gpu-suite gpu-ranks mnist mnist-torchrun-2 designsafe tiny_imagenet dogs bench"
CHECKS=${TRAINBOOK_BUNDLE_CHECKS:-$ALL_CHECKS}
for c in $CHECKS; do
  case " $ALL_CHECKS " in
    *" $c "*) ;;
    *) echo "run.sh: TRAINBOOK_BUNDLE_CHECKS names '$c', which is not a check (the checks: $ALL_CHECKS)" >&2; exit 2 ;;
  esac
done
DEADLINE=${TRAINBOOK_BUNDLE_DEADLINE:-}
[[ -z "$DEADLINE" || "$DEADLINE" =~ ^[0-9]+$ ]] ||
  { echo "run.sh: TRAINBOOK_BUNDLE_DEADLINE is '$DEADLINE', not a whole number of seconds" >&2; exit 2; }

TXT=$REPORT/report.txt
RESULTS=$WORK/results.tsv
: >"$TXT"
: >"$RESULTS"
GPU=$("$PY" -c 'import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")' 2>/dev/null)
{
  echo "trainbook GPU bundle: $(tr -d '\n' <"$HERE/MANIFEST.json")"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  host: $(hostname)  cores: $(nproc)"
  echo "python: $PY ($("$PY" -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__)' 2>&1))"
  echo "GPU: ${GPU:-none}"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
} | tee -a "$TXT"

# check NAME LIMIT_S CMD...: runs CMD with a time limit; records passed/failed/timeout.
check() {
  local name=$1 limit=$2
  shift 2
  if [ -n "$DEADLINE" ]; then
    local left=$((DEADLINE - SECONDS - 15))
    if [ $left -lt 30 ]; then
      echo "NOT RUN $name: $((DEADLINE - SECONDS)) s left of TRAINBOOK_BUNDLE_DEADLINE=$DEADLINE" | tee -a "$TXT"
      printf '%s\tnot-run\t0\t0\t0\t%s\n' "$name" "out of time (TRAINBOOK_BUNDLE_DEADLINE=$DEADLINE)" >>"$RESULTS"
      return
    fi
    [ $left -lt "$limit" ] && limit=$left
  fi
  echo | tee -a "$TXT"
  echo "=== $name (limit ${limit}s): $*" | tee -a "$TXT"
  local t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@" >"$WORK/$name.log" 2>&1
  local rc=$?
  cat "$WORK/$name.log" >>"$TXT"
  tail -n 25 "$WORK/$name.log"
  local status=passed
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then status=timeout; elif [ $rc -ne 0 ]; then status=failed; fi
  local skipped
  skipped=$(grep -c 'SKIPPED' "$WORK/$name.log")
  echo "=== $name: $status (exit $rc, $((SECONDS - t0)) s, $skipped SKIPPED lines)" | tee -a "$TXT"
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$status" "$((SECONDS - t0))" "$rc" "$skipped" >>"$RESULTS"
}

# skip NAME REASON
skip() {
  echo "SKIPPED $1: $2" | tee -a "$TXT"
  printf '%s\tskipped\t0\t0\t1\t%s\n' "$1" "$2" >>"$RESULTS"
}

# The benchmark's DesignSafe stand-in (640 training JPEGs at 640x480, as the real set's
# photos), drawn on the CPU while the GPU suites run.
if [ -n "$GPU" ] && [ ! -d "$WORK/designsafe/Train" ]; then
  "$PY" "$HERE/data-scripts/designsafe_standin.py" "$WORK/designsafe" --train 640 --val 30 \
    >"$WORK/designsafe-standin.log" 2>&1 &
  STANDIN=$!
fi

B=$HERE/bin
# The examples on the GPU. TRAINBOOK_BUNDLE_DEVICE=cpu runs them on the CPU instead, in
# float32, MNIST for 30 batches of its epoch, with longer limits (tests/gpu_bundle.rs does, so
# that their flags are tried here; on a 2-core machine without AVX-512 and busy with other
# tests, the DesignSafe run took 126 s).
DEVICE=${TRAINBOOK_BUNDLE_DEVICE:-cuda}
if [ "$DEVICE" = cpu ]; then
  X=10; MIXED=(); SHORT=(--limit-train-batches 30)
else
  X=1; MIXED=(--precision bf16 --channels-last); SHORT=()
fi

# example NAME: one example's check; without a GPU (and not on the CPU by choice) it only shows
# that the binary starts (its libraries load).
example() {
  if [ -z "$GPU" ] && [ "$DEVICE" != cpu ]; then
    if [ "$1" = mnist-torchrun-2 ]; then
      skip "$1" "no CUDA GPU on this machine"
    elif "$B/$1" --help >"$WORK/$1.log" 2>&1; then
      skip "$1" "no CUDA GPU on this machine (the binary starts: --help ran)"
    else
      cat "$WORK/$1.log" >>"$TXT"
      printf '%s\tfailed\t0\t1\t0\t%s\n' "$1" "does not start without a GPU" >>"$RESULTS"
    fi
    return
  fi
  case $1 in
    mnist) check mnist $((40 * X)) "$B/mnist" --data "$HERE/data/mnist" --epochs 1 \
      --device "$DEVICE" --workers 4 --no-resume "${SHORT[@]}" --out "$WORK/runs/mnist" ;;
    mnist-torchrun-2) check mnist-torchrun-2 $((40 * X)) "$PY" -m torch.distributed.run \
      --standalone --nproc-per-node=2 --no-python "$B/mnist" --data "$HERE/data/mnist" \
      --epochs 1 --device "$DEVICE" --workers 4 --no-resume --cuda-graphs "${SHORT[@]}" \
      --out "$WORK/runs/mnist-2" ;;
    designsafe)
      check designsafe $((30 * X)) "$B/designsafe" --small-data --data "$WORK/designsafe-small" \
        --image-size 64 --epochs 2 --lr 1e-3 --device "$DEVICE" "${MIXED[@]}" --no-resume \
        --cuda-graphs --profile 6 --out "$WORK/runs/designsafe"
      # Its profile (steps 2-7: eager warm-up steps, the capture, replays), one line per step:
      # its phases, GPU kernels and launch calls (REPORT/profile.json, in report.json).
      if [ -d "$WORK/runs/designsafe/profile" ]; then
        echo | tee -a "$TXT"
        "$PY" "$HERE/benches/trace_summary.py" "$WORK/runs/designsafe/profile" \
          --json "$REPORT/profile.json" 2>&1 | tee -a "$TXT"
      fi ;;
    tiny_imagenet) check tiny_imagenet $((30 * X)) "$B/tiny_imagenet" --small-data \
      --data "$WORK/tiny-imagenet-small" --resize 64 --image-size 56 --batch-size 16 --epochs 1 \
      --device "$DEVICE" --cudnn-benchmark --tf32 --no-resume --out "$WORK/runs/tiny_imagenet" ;;
    dogs) check dogs $((30 * X)) "$B/dogs" --small-data --data "$WORK/dogs-small" --resize 64 \
      --image-size 56 --batch-size 16 --epochs 1 --device "$DEVICE" --no-resume \
      --out "$WORK/runs/dogs" ;;
  esac
}

# bench: the GPU benchmark, on the DesignSafe stand-in drawn in the background.
bench() {
  [ -n "${STANDIN:-}" ] && wait "$STANDIN"
  STANDIN=
  check bench 330 "$B/gpu-bench" --out "$REPORT" --data "$WORK/designsafe" --scripts "$HERE/benches"
  # Its figures as a record for the checkout's benches/results (BENCHMARKS.md is generated from
  # those): REPORT_DIR/records/gpu/KIND.json, to be copied there. Not where the bench skipped.
  if [ -f "$REPORT/gpu.json" ] && ! grep -q '"skipped"' "$REPORT/gpu.json"; then
    local measured
    measured=$("$PY" -c 'import json, sys; m = json.load(open(sys.argv[1])); print(m["commit"] + (" with uncommitted changes" if m.get("uncommitted_changes") else ""))' "$HERE/MANIFEST.json")
    "$PY" "$HERE/scripts/bench/bench_records.py" record gpu --json "$REPORT/gpu.json" \
      --results "$REPORT/records" --out "$REPORT/records/BENCHMARKS.md" --commit "$measured" 2>&1 | tee -a "$TXT"
  fi
}

for c in $CHECKS; do
  case $c in
    gpu-suite) check gpu-suite 240 "$B/gpu" --test-threads=1 --nocapture ;;
    gpu-ranks) check gpu-ranks 150 "$B/gpu_ranks" --test-threads=1 --nocapture ;;
    bench) bench ;;
    *) example "$c" ;;
  esac
done
[ -n "${STANDIN:-}" ] && wait "$STANDIN"

"$PY" - "$RESULTS" "$REPORT" "$HERE/MANIFEST.json" "$GPU" <<'PYEOF' | tee -a "$TXT"
import json, os, sys
results, report, manifest, gpu = sys.argv[1:5]
checks = []
for line in open(results):
    f = line.rstrip("\n").split("\t")
    row = {"name": f[0], "status": f[1], "seconds": int(f[2]), "exit": int(f[3]), "skipped_lines": int(f[4])}
    if len(f) > 5:
        row["reason"] = f[5]
    # Without a GPU the suites and the bench run and skip inside.
    if row["status"] == "passed" and not gpu and row["name"] in ("gpu-suite", "gpu-ranks", "bench"):
        row["status"] = "skipped"
        row["reason"] = "no CUDA GPU on this machine (the binary ran and skipped)"
    checks.append(row)
bench = os.path.join(report, "gpu.json")
profile = os.path.join(report, "profile.json")
out = {
    "gpu": gpu or None,
    "manifest": json.load(open(manifest)),
    "checks": checks,
    "bench": json.load(open(bench)) if os.path.exists(bench) else None,
    "profile": json.load(open(profile)) if os.path.exists(profile) else None,
    "failed": [c["name"] for c in checks if c["status"] in ("failed", "timeout")],
    "not_run": [c["name"] for c in checks if c["status"] == "not-run"],
}
json.dump(out, open(os.path.join(report, "report.json"), "w"), indent=1)
print()
for c in checks:
    print(f'{c["name"]:18} {c["status"]:8} {c["seconds"]:4} s')
print("failed: " + (", ".join(out["failed"]) or "none"))
if out["not_run"]:
    print("not run (out of time): " + ", ".join(out["not_run"]))
sys.exit(1 if out["failed"] or out["not_run"] else 0)
PYEOF
rc=${PIPESTATUS[0]}
echo "report: $REPORT/report.txt, $REPORT/report.json"
exit $rc
