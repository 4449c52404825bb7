#!/usr/bin/env python3
"""Exports ResNet34 weights as safetensors with torchvision's state_dict names, for
`trainbook::models::load_safetensors`:

    .venv/bin/python data-scripts/resnet34_weights.py [OUT]              # ImageNet weights (download)
    .venv/bin/python data-scripts/resnet34_weights.py [OUT] --random-init [--seed N]

The ImageNet weights (torchvision's IMAGENET1K_V1) are downloaded by torchvision from PyTorch's
servers; without internet access the script says so and exits with status 2 (use --random-init
for tests, or copy a resnet34-*.pth file into TORCH_HOME/hub/checkpoints beforehand). The file
holds torchvision's 1000-class `fc`; trainbook loads it with strict=false into a model with the
course's 3-class head, which reports `fc.*` as replaced. Default OUT: data/weights/resnet34.safetensors.
"""
import argparse
import pathlib
import sys

import torch
import torchvision
from safetensors.torch import save_file


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", nargs="?", default="data/weights/resnet34.safetensors", type=pathlib.Path)
    parser.add_argument("--random-init", action="store_true", help="torchvision's random initialisation instead of ImageNet weights")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.random_init:
        torch.manual_seed(args.seed)
        model = torchvision.models.resnet34()
        source = f"random init (seed {args.seed})"
    else:
        try:
            model = torchvision.models.resnet34(weights=torchvision.models.ResNet34_Weights.IMAGENET1K_V1)
        except Exception as e:  # URLError, HTTPError, socket errors, ...
            print(f"resnet34: cannot download the ImageNet weights ({e.__class__.__name__}: {e}).\n"
                  "  Offline? Use --random-init, or place resnet34-b627a593.pth in "
                  f"{torch.hub.get_dir()}/checkpoints and retry.", file=sys.stderr)
            sys.exit(2)
        source = "torchvision IMAGENET1K_V1"
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save_file(state, str(args.out), metadata={"source": source, "arch": "resnet34"})
    print(f"resnet34: wrote {len(state)} tensors ({source}) to {args.out}")


if __name__ == "__main__":
    main()
