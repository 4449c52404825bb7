"""Oracle for tests/data/data_loading.rs.

  datasets.py folder ROOT         -> JSON {class_to_idx, samples: [[path, target], ...]} of ImageFolder
  datasets.py modes DIR           -> writes PNGs/BMP/GIF/WebP in odd modes to DIR, prints JSON
                                     [{file, mode}] and writes DIR/<file>.rgb = PIL convert("RGB")
  datasets.py mnist ROOT TRAIN    -> JSON {len, first_label, checksum} of torchvision's MNIST
"""
import json
import sys

import numpy as np
from PIL import Image

cmd = sys.argv[1]
if cmd == "folder":
    from torchvision.datasets import ImageFolder

    ds = ImageFolder(sys.argv[2])
    json.dump({"class_to_idx": ds.class_to_idx, "samples": ds.samples}, sys.stdout)
elif cmd == "modes":
    d = sys.argv[2]
    rng = np.random.default_rng(3)
    rgb = rng.integers(0, 256, (37, 53, 3), dtype=np.uint8)
    base = Image.fromarray(rgb)
    made = []

    def save(name, img, **kw):
        img.save(f"{d}/{name}", **kw)
        Image.open(f"{d}/{name}").convert("RGB").tobytes()
        with open(f"{d}/{name}.rgb", "wb") as f:
            f.write(Image.open(f"{d}/{name}").convert("RGB").tobytes())
        made.append({"file": name, "mode": Image.open(f"{d}/{name}").mode})

    save("grey.png", base.convert("L"))
    save("grey_alpha.png", base.convert("LA"))
    save("rgba.png", base.convert("RGBA"))
    save("palette.png", base.convert("P", palette=Image.Palette.ADAPTIVE, colors=17))
    save("rgb.bmp", base)
    save("palette.gif", base.convert("P", palette=Image.Palette.ADAPTIVE, colors=31))
    save("lossless.webp", base, lossless=True)
    save("rgb.tiff", base)
    save("grey.tiff", base.convert("L"))
    save("rgb.ppm", base)
    save("grey.pgm", base.convert("L"))
    # 16-bit grey with values between multiples of 257 (and both sides of each rounding point):
    # trainbook scales them to round(v / 257); the raw values go to grey16.png.u16 for the test.
    values = rng.integers(0, 65536, (21, 34)).astype(np.uint16)
    values.flat[:6] = [0, 128, 129, 385, 386, 65535]
    save("grey16.png", Image.fromarray(values))
    with open(f"{d}/grey16.png.u16", "wb") as f:
        f.write(values.astype("<u2").tobytes())
    json.dump(made, sys.stdout)
elif cmd == "mnist":
    from torchvision.datasets import MNIST

    ds = MNIST(sys.argv[2], train=sys.argv[3] == "1", download=False)
    data = ds.data.numpy().astype(np.uint64)
    checksum = int((data.reshape(len(ds), -1).sum(axis=1) * (np.arange(len(ds)) + 1)).sum())
    json.dump({"len": len(ds), "labels": ds.targets[:50].tolist(), "checksum": checksum}, sys.stdout)
