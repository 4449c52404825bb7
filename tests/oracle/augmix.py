"""torchvision's AugMix on given draws, for tests/parity/augmix_parity.rs.

  augmix.py DIR   reads DIR/cases.json ([{"image": name, "width": w, "height": h, "channels":
                  1 or 3, "severity": s, "mixture_width": k, "chain_depth": d, "all_ops": bool,
                  "interpolation": "nearest" | "bilinear", "beta": [2 floats], "mixing": [k
                  floats], "randint": [ints]}]) and each image's raw bytes DIR/<name>.raw, runs
                  torchvision.transforms.AugMix on the PIL image with its two Dirichlet draws
                  replaced by "beta" and "mixing" (the `_sample_dirichlet` method torchvision
                  keeps for tests) and every torch.randint call answered by the next value of
                  "randint" (checked against the call's range), and writes DIR/out_K.raw.
"""
import json
import os
import sys

import torch
from PIL import Image
from torchvision.transforms import AugMix, InterpolationMode


class ReplayedAugMix(AugMix):
    """AugMix whose Dirichlet draws are given."""

    def __init__(self, dirichlet, **kwargs):
        super().__init__(**kwargs)
        self.dirichlet = list(dirichlet)

    def _sample_dirichlet(self, params):
        values = self.dirichlet.pop(0)
        assert params.shape == (1, len(values)), (params.shape, values)
        return torch.tensor([values], dtype=torch.float32)


def replayed_randint(values):
    """A torch.randint that answers the next of `values`, within the call's range."""

    def randint(*args, **kwargs):
        if "high" in kwargs:
            low, high = kwargs.get("low", 0), kwargs["high"]
        else:
            low, high = 0, args[0]
        assert values, "more torch.randint calls than draws"
        v = values.pop(0)
        assert low <= v < high, f"draw {v} outside [{low}, {high})"
        return torch.tensor([v], dtype=kwargs.get("dtype", torch.int64))

    return randint


def main(folder):
    cases = json.load(open(os.path.join(folder, "cases.json")))
    real_randint = torch.randint
    for k, c in enumerate(cases):
        raw = open(os.path.join(folder, c["image"] + ".raw"), "rb").read()
        img = Image.frombytes("RGB" if c["channels"] == 3 else "L", (c["width"], c["height"]), raw)
        augmix = ReplayedAugMix(
            [c["beta"], c["mixing"]],
            severity=c["severity"],
            mixture_width=c["mixture_width"],
            chain_depth=c["chain_depth"],
            all_ops=c["all_ops"],
            interpolation=InterpolationMode(c["interpolation"]),
        )
        values = list(c["randint"])
        torch.randint = replayed_randint(values)
        try:
            out = augmix(img)
        finally:
            torch.randint = real_randint
        assert not values, f"case {k}: {len(values)} draws left over"
        assert not augmix.dirichlet, f"case {k}: a Dirichlet draw left over"
        open(os.path.join(folder, f"out_{k}.raw"), "wb").write(out.tobytes())


if __name__ == "__main__":
    main(sys.argv[1])
