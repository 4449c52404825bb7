"""Oracle for tests/parity/jpeg_parity.rs: writes photo-like JPEGs with Pillow in every form a data
set holds (baseline and progressive; 4:2:0, 4:2:2 and 4:4:4 chroma; qualities 50 to 95; grey;
CMYK; restart markers; odd sizes down to 1x1; a file with junk bytes before its end marker;
a file whose scan data is corrupt; cut-off files) and what Pillow and torchvision make of them.
Pillow cannot write YCCK: the files DIR/ycck_*.jpg that the Rust side wrote with TurboJPEG
before calling are decoded too (kind "ycck"), after checking that Pillow reads them as YCCK
(mode CMYK, Adobe transform 2).

  jpeg.py DIR -> prints JSON [{file, kind, decoded, tensors: [{steps, shape}], error}], and writes
                 DIR/<file>.rgb    PIL Image.open(f).convert("RGB").tobytes() (when it decodes)
                 DIR/<file>.<k>.f32 torchvision pipeline k on that image (float32, C order)
"""
import io
import json
import os
import sys

import numpy as np
import torch
from PIL import Image
from torchvision import transforms as T

out = sys.argv[1]
rng = np.random.default_rng(2026)


def photo(w, h):
    """Gradients, sensor-like noise, saturated colour blocks with hard edges, thin coloured lines
    (chroma detail that 4:2:0 subsampling smears) and a disc: the content where decoders differ."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.stack(
        [x * 255 / max(w - 1, 1), y * 255 / max(h - 1, 1), 128 + 100 * np.sin((x + 2 * y) / 7)], -1
    )
    for _ in range(8):
        x0, y0 = rng.integers(0, w), rng.integers(0, h)
        img[y0 : y0 + rng.integers(1, h + 1), x0 : x0 + rng.integers(1, w + 1)] = rng.integers(0, 256, 3)
    for _ in range(4):
        col = rng.integers(0, w)
        img[:, col : col + 1] = rng.integers(0, 256, 3)
    r = min(w, h) / 3
    img[(x - w / 2) ** 2 + (y - h / 2) ** 2 < r * r] = rng.integers(0, 256, 3)
    img += rng.normal(0, 18, img.shape)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


cases = []  # (file, kind, bytes)


def save(name, kind, img, **kw):
    buf = io.BytesIO()
    img.save(buf, "JPEG", **kw)
    cases.append((name, kind, buf.getvalue()))


sizes = [(1, 1), (2, 3), (7, 5), (17, 33), (97, 1), (233, 157), (301, 199), (640, 480)]
for i, (w, h) in enumerate(sizes):
    img = photo(w, h)
    for quality, sub, prog in [(75, 2, False), (95, 2, True), (90, 1, False), (85, 0, True), (50, 2, False)]:
        chroma = {2: "420", 1: "422", 0: "444"}[sub]
        kind = f"{'progressive' if prog else 'baseline'} {chroma} q{quality}"
        save(f"c{i}_{w}x{h}_{chroma}_q{quality}_{'p' if prog else 'b'}.jpg", kind, img,
             quality=quality, subsampling=sub, progressive=prog)
    save(f"g{i}_{w}x{h}.jpg", "grey", img.convert("L"), quality=90)
    save(f"k{i}_{w}x{h}.jpg", "cmyk", img.convert("CMYK"), quality=90)
    save(f"r{i}_{w}x{h}.jpg", "restart markers", img, quality=85, restart_marker_blocks=3)

# Junk before the end-of-image marker: libjpeg warns ("extraneous bytes"), Pillow decodes.
whole = {n: d for n, _, d in cases}
base = whole["c7_640x480_420_q75_b.jpg"]
cases.append(("junk_before_eoi.jpg", "extraneous bytes", base[:-2] + b"\x00\x17\x00" + base[-2:]))
# A corrupt entropy-coded segment: bytes in the middle of the scan data changed (no 0xFF made or
# broken, so no marker appears or goes); libjpeg warns ("Corrupt JPEG data") and goes on, Pillow
# decodes what it makes of them.
scan = base.index(b"\xff\xda") + 2 + int.from_bytes(base[base.index(b"\xff\xda") + 2 : base.index(b"\xff\xda") + 4], "big")
corrupt = bytearray(base)
for at in range(scan + (len(base) - scan) // 2, scan + (len(base) - scan) // 2 + 64):
    if corrupt[at] != 0xFF and corrupt[at - 1] != 0xFF and corrupt[at] ^ 0x5A != 0xFF:
        corrupt[at] ^= 0x5A
cases.append(("corrupt_scan.jpg", "corrupt segment", bytes(corrupt)))
# YCCK, written by the Rust side (TurboJPEG compresses CMYK pixels as YCCK).
for name in sorted(os.listdir(out)):
    if name.startswith("ycck_") and name.endswith(".jpg"):
        with open(f"{out}/{name}", "rb") as f:
            data = f.read()
        with Image.open(io.BytesIO(data)) as im:
            assert (im.mode, im.info.get("adobe_transform")) == ("CMYK", 2), (name, im.mode, im.info)
        cases.append((name, "ycck", data))
# Cut off: Pillow raises "image file is truncated".
cases.append(("cut_baseline.jpg", "truncated", base[: len(base) * 2 // 3]))
prog = whole["c7_640x480_420_q95_p.jpg"]
cases.append(("cut_progressive.jpg", "truncated", prog[: len(prog) // 2]))

pipelines = [
    T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor()]),
    T.Compose([T.Resize((31, 57)), T.ToTensor()]),
]
report = []
for name, kind, data in cases:
    with open(f"{out}/{name}", "wb") as f:
        f.write(data)
    entry = {"file": name, "kind": kind, "decoded": False, "tensors": [], "error": None}
    try:
        img = Image.open(f"{out}/{name}").convert("RGB")
    except OSError as e:
        entry["error"] = str(e)
        report.append(entry)
        continue
    entry["decoded"] = True
    with open(f"{out}/{name}.rgb", "wb") as f:
        f.write(img.tobytes())
    for k, pipeline in enumerate(pipelines):
        t = pipeline(img)
        assert t.dtype == torch.float32
        t.numpy().tofile(f"{out}/{name}.{k}.f32")
        entry["tensors"].append({"shape": list(t.shape)})
    report.append(entry)
json.dump(report, sys.stdout)
