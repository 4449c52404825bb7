#!/usr/bin/env python3
"""Generates a stand-in for Tiny ImageNet 200 with exactly the layout of the unpacked archive
(tiny-imagenet-200.zip), so that code written for the real set runs where it is not available:

    OUT/wnids.txt                       class ids (WordNet-like ids n0xxxxxxx), one a line, unsorted
    OUT/words.txt                       wnid<TAB>comma-separated names (more wnids than the classes)
    OUT/train/<wnid>/images/<wnid>_<i>.JPEG
    OUT/train/<wnid>/<wnid>_boxes.txt   file<TAB>x0<TAB>y0<TAB>x1<TAB>y1
    OUT/val/images/val_<k>.JPEG         classes shuffled
    OUT/val/val_annotations.txt         file<TAB>wnid<TAB>x0<TAB>y0<TAB>x1<TAB>y1
    OUT/test/images/test_<k>.JPEG       unlabelled

Each class is a coloured shape (20 hues x 10 shapes, then background tints for more than 200
classes) at a random position and size on a noisy random background, so the classes are
learnable; about one image in 40 is greyscale, as in the real set. All images are 64x64 JPEGs.
Output is deterministic for a given --seed. The default is small (10 classes, 20 training and
5 validation images each: a second); the real set's size is --classes 200 --train-per-class 500
--val-per-class 50 (about 3 ms an image: a few minutes).
"""
import argparse
import colorsys
import pathlib
import sys
import tempfile

import numpy as np
from PIL import Image, ImageDraw

SIZE = 64
HUES = ("red", "orange", "yellow", "lime", "green", "jade", "teal", "cyan", "azure", "blue",
        "indigo", "violet", "purple", "magenta", "pink", "rose", "brown", "olive", "grey", "white")
SHAPES = ("disc", "square", "triangle", "diamond", "ring", "cross", "horizontal stripes",
          "vertical stripes", "checkerboard", "bar")


def style(c):
    """(hue, shape, tint) of class c: every (hue, shape) pair once in the first 200 classes, and
    the first classes already differ in both."""
    shape = c % len(SHAPES)
    hue = (c // len(SHAPES) + 3 * shape) % len(HUES)
    return hue, shape, c // (len(HUES) * len(SHAPES))


def class_colour(c):
    h = style(c)[0]
    if HUES[h] == "grey":
        return (0.0, 0.0, 0.55)
    if HUES[h] == "white":
        return (0.0, 0.0, 0.95)
    if HUES[h] == "brown":
        return (0.07, 0.75, 0.45)
    if HUES[h] == "olive":
        return (0.17, 0.8, 0.5)
    return (h / 16.0, 0.85, 0.9)


def class_name(c):
    hue, shape, tint = style(c)
    name = f"{HUES[hue]} {SHAPES[shape]}"
    return name + (f" on tint {tint}" if tint else "")


def draw_image(c, rng):
    """One 64x64 image of class c and the shape's bounding box."""
    _, shape, tint = style(c)
    base = rng.uniform(40, 200)
    bg = np.full((SIZE, SIZE, 3), base) + rng.normal(0, 25, 3)
    if tint:
        bg += np.array([(tint * 37) % 60 - 30, (tint * 53) % 60 - 30, (tint * 71) % 60 - 30])
    ramp = np.linspace(-1, 1, SIZE)
    bg += rng.uniform(-30, 30) * ramp[None, :, None] + rng.uniform(-30, 30) * ramp[:, None, None]
    img = Image.fromarray(np.clip(bg, 0, 255).astype(np.uint8))
    h, s, v = class_colour(c)
    r, g, b = colorsys.hsv_to_rgb(h, s, np.clip(v + rng.uniform(-0.1, 0.1), 0, 1))
    colour = tuple(int(np.clip(x * 255 + rng.normal(0, 12), 0, 255)) for x in (r, g, b))
    half = rng.uniform(10, 22)
    cx, cy = rng.uniform(half + 2, SIZE - half - 2, 2)
    x0, y0, x1, y1 = cx - half, cy - half, cx + half, cy + half
    d = ImageDraw.Draw(img)
    shape = SHAPES[shape]
    if shape == "disc":
        d.ellipse([x0, y0, x1, y1], fill=colour)
    elif shape == "square":
        d.rectangle([x0, y0, x1, y1], fill=colour)
    elif shape == "triangle":
        d.polygon([(cx, y0), (x1, y1), (x0, y1)], fill=colour)
    elif shape == "diamond":
        d.polygon([(cx, y0), (x1, cy), (cx, y1), (x0, cy)], fill=colour)
    elif shape == "ring":
        d.ellipse([x0, y0, x1, y1], outline=colour, width=max(3, int(half / 3)))
    elif shape == "cross":
        w = half / 3
        d.rectangle([cx - w, y0, cx + w, y1], fill=colour)
        d.rectangle([x0, cy - w, x1, cy + w], fill=colour)
    elif shape in ("horizontal stripes", "vertical stripes"):
        step = max(4, int(half / 2))
        for k in range(int(x0 if shape[0] == "v" else y0), int(x1 if shape[0] == "v" else y1), step):
            box = [k, y0, k + step // 2, y1] if shape[0] == "v" else [x0, k, x1, k + step // 2]
            d.rectangle(box, fill=colour)
    elif shape == "checkerboard":
        step = max(4, int(half / 2))
        for i, x in enumerate(range(int(x0), int(x1), step)):
            for j, y in enumerate(range(int(y0), int(y1), step)):
                if (i + j) % 2 == 0:
                    d.rectangle([x, y, x + step - 1, y + step - 1], fill=colour)
    else:  # bar, at a random slant
        t = rng.uniform(0, np.pi)
        dx, dy = np.cos(t) * half, np.sin(t) * half
        d.line([(cx - dx, cy - dy), (cx + dx, cy + dy)], fill=colour, width=max(4, int(half / 2)))
    arr = np.asarray(img).astype(np.float64) + rng.normal(0, 10, (SIZE, SIZE, 3))
    img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
    box = [int(np.clip(v, 0, SIZE - 1)) for v in (x0, y0, x1, y1)]
    return img, box


def save(img, path, rng):
    if rng.uniform() < 1 / 40:
        img = img.convert("L")
    img.save(path, "JPEG", quality=90)  # PIL's default 4:2:0 chroma subsampling


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", nargs="?", default="data/tiny-imagenet-200", type=pathlib.Path)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--train-per-class", type=int, default=20)
    p.add_argument("--val-per-class", type=int, default=5)
    p.add_argument("--test", type=int, default=None, help="test images (default: as many as val)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    out = a.out
    if (out / "wnids.txt").exists():
        print(f"{out}: wnids.txt exists, nothing to do")
        return 0
    if out.exists() and any(out.iterdir()):
        sys.exit(f"{out} exists and is not empty, but has no wnids.txt: not overwriting it")
    if a.classes < 1 or min(a.train_per_class, a.val_per_class) < 1:
        sys.exit("--classes, --train-per-class and --val-per-class must be at least 1")

    rng = np.random.default_rng([a.seed, 0])
    ids = rng.choice(np.arange(1_000_000, 9_999_999), size=a.classes * 4, replace=False)
    wnids = [f"n0{x:07d}" for x in ids[: a.classes]]  # class c = wnids[c], in file order
    extra = [f"n0{x:07d}" for x in ids[a.classes:]]

    # A private folder for this run (two runs at once must not share one), renamed into place
    # whole at the end.
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    (tmp / "val/images").mkdir(parents=True)
    (tmp / "test/images").mkdir(parents=True)
    (tmp / "wnids.txt").write_text("".join(w + "\n" for w in wnids))
    words = {w: f"{class_name(c)}, stand-in class {c}" for c, w in enumerate(wnids)}
    words.update({w: f"unused {i}, distractor" for i, w in enumerate(extra)})
    (tmp / "words.txt").write_text("".join(f"{w}\t{words[w]}\n" for w in sorted(words)))

    for c, wnid in enumerate(wnids):
        images = tmp / "train" / wnid / "images"
        images.mkdir(parents=True)
        boxes = []
        for i in range(a.train_per_class):
            r = np.random.default_rng([a.seed, 1, c, i])
            img, box = draw_image(c, r)
            name = f"{wnid}_{i}.JPEG"
            save(img, images / name, r)
            boxes.append(f"{name}\t" + "\t".join(map(str, box)) + "\n")
        (tmp / "train" / wnid / f"{wnid}_boxes.txt").write_text("".join(boxes))

    val = [(c, i) for c in range(a.classes) for i in range(a.val_per_class)]
    order = rng.permutation(len(val))
    lines = []
    for k, j in enumerate(order):
        c, i = val[j]
        r = np.random.default_rng([a.seed, 2, c, i])
        img, box = draw_image(c, r)
        save(img, tmp / "val/images" / f"val_{k}.JPEG", r)
        lines.append(f"val_{k}.JPEG\t{wnids[c]}\t" + "\t".join(map(str, box)) + "\n")
    (tmp / "val/val_annotations.txt").write_text("".join(lines))

    for k in range(len(val) if a.test is None else a.test):
        r = np.random.default_rng([a.seed, 3, k])
        img, _ = draw_image(int(r.integers(a.classes)), r)
        save(img, tmp / "test/images" / f"test_{k}.JPEG", r)

    if out.exists():
        out.rmdir()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp.rename(out)
    n_train = a.classes * a.train_per_class
    print(f"{out}: Tiny ImageNet stand-in, {a.classes} classes, {n_train} train / {len(val)} val images")
    return 0


if __name__ == "__main__":
    sys.exit(main())
