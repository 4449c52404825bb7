#!/usr/bin/env python3
"""Exports ResNet18/34/50 weights as safetensors with torchvision's state_dict names, for
`trainbook::models::load_safetensors`:

    .venv/bin/python data-scripts/resnet_weights.py --depth 34                # ImageNet weights (download)
    .venv/bin/python data-scripts/resnet_weights.py --depth 50 --out PATH
    .venv/bin/python data-scripts/resnet_weights.py --depth 18 --random-init [--seed N]

ImageNet weights are torchvision's IMAGENET1K_V1 at every depth (for ResNet50 too, although
torchvision's DEFAULT there is IMAGENET1K_V2: V1 is what the course's `pretrained=True` loads).
They are downloaded from PyTorch's servers into TORCH_HOME/hub/checkpoints (reused when already
there); without internet access the script says what to do and exits with status 2.
`--random-init` writes torchvision's random initialisation instead (for tests, no network).
The file holds torchvision's 1000-class `fc`; trainbook loads it with strict=true into
`resnet(.., depth, 1000, HeadKind::Linear)`, or with strict=false into a model with another
head, which reports `fc.*` as replaced. Default --out: data/weights/resnet{DEPTH}.safetensors.
The environment variable TRAINBOOK_WEIGHTS_URL replaces the download address (tests use it to
simulate being offline).
"""
import argparse
import os
import pathlib
import sys

import torch
import torchvision
from safetensors.torch import save_file

WEIGHTS = {
    18: torchvision.models.ResNet18_Weights.IMAGENET1K_V1,
    34: torchvision.models.ResNet34_Weights.IMAGENET1K_V1,
    50: torchvision.models.ResNet50_Weights.IMAGENET1K_V1,
}


def download(depth):
    """torchvision's IMAGENET1K_V1 state_dict for `depth` (what `weights.get_state_dict` does),
    or exit 2 with a message when it cannot be downloaded."""
    url = os.environ.get("TRAINBOOK_WEIGHTS_URL") or WEIGHTS[depth].url
    try:
        return torch.hub.load_state_dict_from_url(url, progress=True, check_hash=True)
    except Exception as e:  # URLError, HTTPError, socket errors, a bad hash, ...
        name = url.rsplit("/", 1)[-1]
        print(f"resnet{depth}: cannot download torchvision's ImageNet weights (IMAGENET1K_V1) from "
              f"{url} ({e.__class__.__name__}: {e}). Offline? Download that file on a machine "
              f"with internet access and copy it to {torch.hub.get_dir()}/checkpoints/{name} "
              "(TORCH_HOME chooses the folder), then run this script again; or run it with "
              "--random-init for torchvision's random initialisation (tests, training from "
              "scratch).", file=sys.stderr)
        sys.exit(2)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--depth", type=int, choices=sorted(WEIGHTS), required=True)
    parser.add_argument("--out", type=pathlib.Path, help="default: data/weights/resnet{DEPTH}.safetensors")
    parser.add_argument("--random-init", action="store_true", help="torchvision's random initialisation instead of ImageNet weights")
    parser.add_argument("--seed", type=int, default=0, help="seed of --random-init (default 0)")
    args = parser.parse_args(argv)
    out = args.out or pathlib.Path(f"data/weights/resnet{args.depth}.safetensors")
    arch = f"resnet{args.depth}"
    if args.random_init:
        torch.manual_seed(args.seed)
        model = getattr(torchvision.models, arch)()
        source = f"random init (seed {args.seed})"
    else:
        state = download(args.depth)
        model = getattr(torchvision.models, arch)()
        model.load_state_dict(state)
        source = "torchvision IMAGENET1K_V1"
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    out.parent.mkdir(parents=True, exist_ok=True)
    save_file(state, str(out), metadata={"source": source, "arch": arch})
    print(f"{arch}: wrote {len(state)} tensors ({source}) to {out}")


if __name__ == "__main__":
    main()
