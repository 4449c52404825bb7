#!/usr/bin/env python3
"""Kept for older instructions: `resnet34_weights.py [OUT] [--random-init] [--seed N]` is
`resnet_weights.py --depth 34 [--out OUT] [--random-init] [--seed N]` (see that script).
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import resnet_weights  # noqa: E402

if __name__ == "__main__":
    args = sys.argv[1:]
    out = [i for i, a in enumerate(args) if not a.startswith("-") and (i == 0 or args[i - 1] != "--seed")]
    rest = [a for i, a in enumerate(args) if i not in out]
    resnet_weights.main(["--depth", "34"] + [x for i in out for x in ("--out", args[i])] + rest)
