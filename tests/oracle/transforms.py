"""Oracle for tests/parity/transforms_parity.rs: runs torchvision/PIL on the cases given as JSON on
stdin and writes each result as raw bytes to OUT_DIR/case_N.bin (uint8 HWC for "decode" and "op",
float32 CHW for "pipeline"); prints the result shapes as JSON.

Case kinds:
  {"kind": "decode", "image": path}                         PIL open + convert("RGB")
  {"kind": "op", "image": path, "op": name, "magnitude": m} AutoAugment's _apply_op on the PIL image
  {"kind": "pipeline", "image": path, "steps": [[name, *args], ...]}
  {"kind": "space", "transform": "RandAugment"|"TrivialAugmentWide", "bins": n, "size": [h, w]}
      the transform's _augmentation_space as float32 rows in its order: the n magnitudes (zeros
      for an operation without), then 1.0 if the sign is drawn, else 0.0
"""
import json
import pathlib
import sys

import numpy as np
import torch
from PIL import Image
from torchvision import transforms as T
from torchvision.transforms import InterpolationMode
from torchvision.transforms.autoaugment import _apply_op


def step(name, *args):
    if name == "Resize":
        size = args[0] if isinstance(args[0], int) else tuple(args[0])
        if len(args) > 1:  # an interpolation mode's name: nearest, bilinear, bicubic
            return T.Resize(size, interpolation=InterpolationMode(args[1]))
        return T.Resize(size)
    if name == "CenterCrop":
        return T.CenterCrop(args[0] if isinstance(args[0], int) else tuple(args[0]))
    if name == "ToTensor":
        return T.ToTensor()
    if name == "Normalize":
        return T.Normalize(args[0], args[1])
    raise ValueError(name)


out_dir = pathlib.Path(sys.argv[1])
shapes = []
for i, case in enumerate(json.load(sys.stdin)):
    if case["kind"] == "space":
        t = getattr(T, case["transform"])()
        bins = case["bins"]
        if case["transform"] == "TrivialAugmentWide":  # its space does not depend on the size
            space = t._augmentation_space(bins)
        else:
            space = t._augmentation_space(bins, tuple(case["size"]))
        rows = []
        for name, (mags, signed) in space.items():
            values = [float(v) for v in mags] if mags.ndim > 0 else [0.0] * bins
            rows.append(values + [1.0 if signed else 0.0])
        arr = np.array(rows, dtype=np.float32)
        (out_dir / f"case_{i}.bin").write_bytes(np.ascontiguousarray(arr).tobytes())
        shapes.append(list(arr.shape))
        continue
    img = Image.open(case["image"]).convert("RGB")
    if case["kind"] == "decode":
        arr = np.asarray(img, dtype=np.uint8)
    elif case["kind"] == "op":
        mode = InterpolationMode(case.get("interpolation", "nearest"))
        res = _apply_op(img, case["op"], float(case["magnitude"]), mode, None)
        arr = np.asarray(res, dtype=np.uint8)
    else:
        arr = T.Compose([step(*s) for s in case["steps"]])(img).numpy().astype(np.float32)
    (out_dir / f"case_{i}.bin").write_bytes(np.ascontiguousarray(arr).tobytes())
    shapes.append(list(arr.shape))
json.dump(shapes, sys.stdout)
