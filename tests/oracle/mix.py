"""torchvision's transforms.v2.MixUp and CutMix for tests/parity/mix_parity.rs.

  mix.py beta ALPHA N  prints N samples of torch.distributions.Beta(ALPHA, ALPHA) as JSON (what
                       MixUp and CutMix draw their weight from), torch.manual_seed(0) first.
  mix.py apply DIR     reads DIR/input.safetensors (images [B,C,H,W] float32, labels [B]
                       int64) and DIR/draws.json ([["mixup", lam] | ["cutmix", lam, cx, cy]]),
                       runs each draw through torchvision's own make_params/transform (the Beta
                       sample and torch.randint replaced by the given values), and writes
                       DIR/apply.safetensors: images_K, labels_K and box_K ([x1,y1,x2,y2,
                       lam_adjusted as float64]) for CutMix.
"""
import json
import os
import sys

import torch
from safetensors.torch import load_file, save_file
from torchvision.transforms import v2


class Fixed:
    """A stand-in for the transform's Beta distribution: always `lam`."""

    def __init__(self, lam):
        self.lam = lam

    def sample(self, shape=()):
        return torch.tensor([self.lam], dtype=torch.float64)


def main():
    cmd, d = sys.argv[1], sys.argv[2]
    if cmd == "beta":
        torch.manual_seed(0)
        alpha, n = float(d), int(sys.argv[3])
        beta = torch.distributions.Beta(torch.tensor([alpha]), torch.tensor([alpha]))
        print(json.dumps([float(beta.sample(())) for _ in range(n)]))
        return
    assert cmd == "apply"
    inp = load_file(os.path.join(d, "input.safetensors"))
    images, labels = inp["images"], inp["labels"]
    classes = int(os.environ.get("MIX_CLASSES", "10"))
    draws = json.load(open(os.path.join(d, "draws.json")))
    out = {}
    for k, draw in enumerate(draws):
        if draw[0] == "mixup":
            t = v2.MixUp(alpha=1.0, num_classes=classes)
            t._dist = Fixed(draw[1])
            params = {"labels": labels, "batch_size": labels.shape[0], **t.make_params([images])}
        else:
            t = v2.CutMix(alpha=1.0, num_classes=classes)
            t._dist = Fixed(draw[1])
            centre = iter([draw[2], draw[3]])  # torch.randint(W), then torch.randint(H)
            real = torch.randint
            torch.randint = lambda high, size: torch.tensor([next(centre)])
            try:
                made = t.make_params([images])
            finally:
                torch.randint = real
            params = {"labels": labels, "batch_size": labels.shape[0], **made}
            out[f"box_{k}"] = torch.tensor(list(made["box"]) + [made["lam_adjusted"]], dtype=torch.float64)
        out[f"images_{k}"] = t.transform(images, params).contiguous()
        out[f"labels_{k}"] = t.transform(labels, params).contiguous()
    save_file(out, os.path.join(d, "apply.safetensors"))


main()
