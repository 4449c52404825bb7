"""Oracle for tests/parity/random_crop_parity.rs: torchvision's RandomResizedCrop /
RandomHorizontalFlip pieces on the cases given as JSON on stdin. Prints one JSON result per case;
images go to OUT_DIR/src_N.bin (the generated source, uint8 HWC) and OUT_DIR/case_N.bin (the
result).

Case kinds:
  {"kind": "resized_crop", "image": [W, H, SEED], "box": [top, left, h, w], "size": [oh, ow]}
      F.resized_crop(PIL image, top, left, h, w, size, antialias=True); result: its shape
  {"kind": "hflip", "image": [W, H, SEED]}                    F.hflip(PIL image); result: shape
  {"kind": "params_fixed", "size": [W, H], "scale": [a, b], "ratio": [a, b], "draws": [u, ...]}
      RandomResizedCrop.get_params itself, with torch.empty(1).uniform_(a, b) and
      torch.randint(lo, hi, (1,)) replaced by functions of the given uniform draws u in [0, 1)
      (torch's CPU formulas: x = u cut to 24 bits, float32(x * (b - a) + a); lo + floor(u * n));
      result: [top, left, h, w, draws used]
  {"kind": "params_random", "size": [W, H], "scale": .., "ratio": .., "n": N, "seed": S}
      N calls of get_params with torch's own generator seeded S; result: [[top, left, h, w], ...]
"""
import json
import math
import pathlib
import sys

import numpy as np
import torch
from PIL import Image
from torchvision import transforms as T
from torchvision.transforms import functional as F


def picture(width, height, seed):
    """A photo-like picture with sharp colour edges: a smooth background, saturated rectangles
    and discs with hard borders, one-pixel lines, and Gaussian noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    img = np.stack([255 * x / max(width, 1), 255 * y / max(height, 1),
                    128 + 100 * np.sin((x + y) / 7.0)], axis=-1)
    for _ in range(12):
        colour = rng.choice([0, 255], size=3) if rng.random() < 0.7 else rng.integers(0, 256, 3)
        x0, y0 = rng.integers(0, width), rng.integers(0, height)
        if rng.random() < 0.5:
            x1, y1 = x0 + rng.integers(1, width // 2 + 2), y0 + rng.integers(1, height // 2 + 2)
            img[y0:y1, x0:x1] = colour
        else:
            r = rng.integers(1, max(width, height) // 4 + 2)
            img[(x - x0) ** 2 + (y - y0) ** 2 <= r * r] = colour
    for _ in range(4):
        img[:, rng.integers(0, width)] = rng.integers(0, 256, 3)
        img[rng.integers(0, height), :] = rng.integers(0, 256, 3)
    img += rng.normal(0, 12, img.shape)
    return np.clip(np.round(img), 0, 255).astype(np.uint8)


def params_fixed(case):
    draws = iter(case["draws"])
    used = [0]

    def next_draw():
        used[0] += 1
        return next(draws)

    class Uniform:
        def uniform_(self, a, b):
            x = np.float32(math.floor(next_draw() * 2**24) / 2**24)
            a32, b32 = np.float32(float(a)), np.float32(float(b))
            return torch.tensor([x * (b32 - a32) + a32], dtype=torch.float32)

    def randint(low, high, size):
        n = high - low
        return torch.tensor([low + min(math.floor(next_draw() * n), n - 1)])

    w, h = case["size"]
    img = torch.zeros(1, h, w, dtype=torch.uint8)
    empty, rand_int = torch.empty, torch.randint
    torch.empty, torch.randint = (lambda *a, **k: Uniform()), randint
    try:
        box = T.RandomResizedCrop.get_params(img, case["scale"], case["ratio"])
    finally:
        torch.empty, torch.randint = empty, rand_int
    return [int(v) for v in box] + [used[0]]


def params_random(case):
    w, h = case["size"]
    img = torch.zeros(1, h, w, dtype=torch.uint8)
    torch.manual_seed(case["seed"])
    return [list(T.RandomResizedCrop.get_params(img, case["scale"], case["ratio"]))
            for _ in range(case["n"])]


torch.set_num_threads(1)
out_dir = pathlib.Path(sys.argv[1])
results = []
for i, case in enumerate(json.load(sys.stdin)):
    if case["kind"] in ("resized_crop", "hflip"):
        src = picture(*case["image"])
        (out_dir / f"src_{i}.bin").write_bytes(src.tobytes())
        img = Image.fromarray(src)
        if case["kind"] == "hflip":
            res = F.hflip(img)
        else:
            top, left, h, w = case["box"]
            res = F.resized_crop(img, top, left, h, w, case["size"], antialias=True)
        arr = np.ascontiguousarray(np.asarray(res, dtype=np.uint8))
        (out_dir / f"case_{i}.bin").write_bytes(arr.tobytes())
        results.append(list(arr.shape))
    elif case["kind"] == "params_fixed":
        results.append(params_fixed(case))
    else:
        results.append(params_random(case))
json.dump(results, sys.stdout)
