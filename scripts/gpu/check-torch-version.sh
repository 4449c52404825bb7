#!/usr/bin/env bash
# Builds trainbook against a second PyTorch and runs, against it, the tests that exercise
# libtorch through trainbook's shim (autocast, GradScaler, fused/foreach optimizers and their
# param groups, SyncBatchNorm's autograd function over Gloo, channels_last, the training loop, models and optimizers against torch/torchvision, the GPU
# suite, which skips without a GPU), then checks that the `cuda` feature compiles against it.
#
#   TORCH=2.11.0 TCH=0.24 CUDA_TOOLKIT=13.0.2 scripts/gpu/check-torch-version.sh   (the defaults)
#
# Uses .venv-torch$TORCH (made once, ~5 GB) and target/torch-$TORCH/ (a copy of the tracked
# files of this working tree, and its build): see scripts/gpu/torch-version-copy.sh.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/scripts/gpu/torch-version-copy.sh"

say "cargo test against $("$VENV/bin/python" -c 'import torch; print(torch.__version__)') at $LIBTORCH"
cargo test --lib --test gpu --test gpu_ranks
# The other tests named above are modules of the themed test binaries (tests/<theme>/main.rs).
cargo test --test training -- amp:: grad_clip:: param_groups:: training_loop::
cargo test --test parity -- memory_format:: models_parity::
cargo test --test distributed -- sync_batch_norm::
say "cargo check --features cuda"
cargo check --features cuda --lib --test gpu --test gpu_ranks --bench gpu
say "trainbook builds and passes against torch $TORCH with tch $TCH"
