"""Oracle for tests/parity/transforms_parity.rs's RandomErasing test: reads JSON configurations
on stdin ({"p", "scale", "ratio", "height", "width", "seeds"}) and prints, for each seed, what
torchvision's RandomErasing does to a tensor of ones after torch.manual_seed(seed):
[top, left, height, width] of the erased box, or null when nothing is erased."""
import json
import sys

import torch
from torchvision import transforms as T

out = []
for c in json.load(sys.stdin):
    t = T.RandomErasing(p=c["p"], scale=tuple(c["scale"]), ratio=tuple(c["ratio"]), value=0)
    boxes = []
    for seed in c["seeds"]:
        torch.manual_seed(seed)
        img = torch.ones(3, c["height"], c["width"])
        erased = t(img) == 0
        if not erased.any():
            boxes.append(None)
            continue
        rows = erased[0].any(dim=1).nonzero().flatten()
        cols = erased[0].any(dim=0).nonzero().flatten()
        top, left = int(rows[0]), int(cols[0])
        h, w = int(rows[-1]) - top + 1, int(cols[-1]) - left + 1
        assert int(erased.sum()) == 3 * h * w, "the erased region is one box"
        boxes.append([top, left, h, w])
    out.append(boxes)
json.dump(out, sys.stdout)
