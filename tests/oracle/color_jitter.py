"""torchvision's ColorJitter adjustments on PIL images, for tests/parity/color_jitter_parity.rs.

  color_jitter.py DIR   reads DIR/cases.json ([{"image": name, "width": w, "height": h,
                        "order": [4 ints], "brightness": f|null, "contrast": f|null,
                        "saturation": f|null, "hue": f|null}]) and each image's raw RGB bytes
                        DIR/<name>.rgb, applies torchvision.transforms.functional's
                        adjust_brightness / adjust_contrast / adjust_saturation / adjust_hue in
                        the given order (ColorJitter.forward's loop), and writes DIR/out_K.rgb.
"""
import json
import os
import sys

from PIL import Image
from torchvision.transforms import functional as F

d = sys.argv[1]
cases = json.load(open(os.path.join(d, "cases.json")))
for k, c in enumerate(cases):
    raw = open(os.path.join(d, c["image"] + ".rgb"), "rb").read()
    img = Image.frombytes("RGB", (c["width"], c["height"]), raw)
    for fn_id in c["order"]:
        if fn_id == 0 and c["brightness"] is not None:
            img = F.adjust_brightness(img, c["brightness"])
        elif fn_id == 1 and c["contrast"] is not None:
            img = F.adjust_contrast(img, c["contrast"])
        elif fn_id == 2 and c["saturation"] is not None:
            img = F.adjust_saturation(img, c["saturation"])
        elif fn_id == 3 and c["hue"] is not None:
            img = F.adjust_hue(img, c["hue"])
    open(os.path.join(d, f"out_{k}.rgb"), "wb").write(img.tobytes())
