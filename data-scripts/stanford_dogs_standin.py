#!/usr/bin/env python3
"""Generates a stand-in for the Stanford Dogs data set with the real set's layout (images.tar as
it unpacks), so that code written for the real set runs where it is not available:

    OUT/Images/n02085620-Chihuahua/n02085620_<k>.jpg     one folder per breed: wnid-Name
    OUT/class_to_imagenet.tsv                            folder<TAB>ImageNet-1k class index

The breeds are the first twelve of Stanford Dogs' 120 (ImageNet indices 151-162, from
Chihuahua to beagle), with their real WordNet ids and folder names. class_to_imagenet.tsv maps
each folder onto its index among ImageNet's 1000 classes, so that a network with ImageNet's
1000-way head (and ImageNet weights) is trained on the breeds' own outputs; for the real set,
data-scripts/stanford_dogs.py writes the same file.

Each picture is a procedurally drawn dog on grass, a floor or a sofa: every breed has its own
coat colours and markings, ear shape, build, leg length and coat length; pose, size, position,
light and noise vary, and neighbouring breeds share features (two kinds of spaniel ears, three
of long coats) so the task is learnable but not trivial. Sizes vary like the real photos' (the
short side between --min-size and --max-size). Output is deterministic for a given --seed.
The default is small (6 breeds, 40 images each at 96-160 px: a second or two); the whole
stand-in is --breeds 12 --per-breed 150 --min-size 200 --max-size 500.
"""
import argparse
import pathlib
import sys
import tempfile

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

# (wnid, folder name as in images.tar, ImageNet-1k index, coat colours, markings, ears, build,
# legs, coat length)
BREEDS = (
    ("n02085620", "Chihuahua", 151, [(205, 160, 110), (90, 60, 40)], "plain", "pointed", 0.8, 0.9, "short"),
    ("n02085782", "Japanese_spaniel", 152, [(245, 245, 240), (25, 25, 25)], "patches", "feathered", 0.9, 0.8, "long"),
    ("n02085936", "Maltese_dog", 153, [(250, 250, 245)], "plain", "floppy", 0.9, 0.6, "floor"),
    ("n02086079", "Pekinese", 154, [(200, 140, 70), (150, 100, 50)], "mask", "feathered", 1.0, 0.5, "long"),
    ("n02086240", "Shih-Tzu", 155, [(230, 215, 190), (120, 80, 50)], "patches", "floppy", 1.0, 0.6, "floor"),
    ("n02086646", "Blenheim_spaniel", 156, [(245, 245, 240), (170, 80, 30)], "patches", "feathered", 1.0, 0.8, "long"),
    ("n02086910", "papillon", 157, [(245, 245, 240), (150, 70, 30)], "mask", "butterfly", 0.9, 0.9, "long"),
    ("n02087046", "toy_terrier", 158, [(35, 30, 30), (180, 110, 50)], "tan_points", "pointed", 0.8, 1.0, "short"),
    ("n02087394", "Rhodesian_ridgeback", 159, [(190, 120, 60)], "ridge", "floppy", 1.3, 1.2, "short"),
    ("n02088094", "Afghan_hound", 160, [(215, 185, 135), (70, 50, 35)], "mask", "feathered", 1.2, 1.3, "floor"),
    ("n02088238", "basset", 161, [(245, 240, 230), (150, 90, 40), (30, 25, 25)], "patches", "long", 1.4, 0.4, "short"),
    ("n02088364", "beagle", 162, [(245, 240, 230), (180, 110, 50), (30, 25, 25)], "saddle", "floppy", 1.1, 0.8, "short"),
)
SCENES = ((85, 140, 60), (150, 120, 90), (120, 110, 150), (190, 180, 160))


def jitter(rng, colour, amount):
    return tuple(int(np.clip(c + rng.normal(0, amount), 0, 255)) for c in colour)


def background(rng, w, h):
    base = np.array(SCENES[rng.integers(len(SCENES))], dtype=np.float64) + rng.normal(0, 20, 3)
    ramp = np.linspace(-1, 1, h)[:, None, None] * rng.uniform(-40, 40)
    grain = rng.normal(0, 14, (h, w, 3))
    return Image.fromarray(np.clip(base + ramp + grain, 0, 255).astype(np.uint8))


def draw_dog(breed, rng, w, h):
    _, _, _, colours, marks, ears, build, legs, coat = breed
    img = background(rng, w, h)
    d = ImageDraw.Draw(img)
    main = jitter(rng, colours[0], 10)
    second = jitter(rng, colours[1 % len(colours)], 10)
    s = min(w, h) * rng.uniform(0.18, 0.27)  # body half-height scale
    facing = 1 if rng.uniform() < 0.5 else -1
    bw, bh = s * 1.3 * build, s * 0.75
    cx = w / 2 + rng.uniform(-0.15, 0.15) * w
    ground = h * rng.uniform(0.72, 0.9)
    leg_len = s * legs
    top = ground - leg_len - 2 * bh
    body = [cx - bw, top, cx + bw, top + 2 * bh]
    # legs
    for lx in (cx - 0.8 * bw, cx - 0.5 * bw, cx + 0.5 * bw, cx + 0.8 * bw):
        d.rectangle([lx - s * 0.13, top + 1.5 * bh, lx + s * 0.13, ground], fill=main)
    # tail
    tx = cx - facing * bw
    d.line([(tx, top + bh * 0.6), (tx - facing * s * 0.7, top - s * rng.uniform(0.1, 0.6))], fill=main, width=max(2, int(s * 0.15)))
    d.ellipse(body, fill=main)
    if marks == "ridge":
        d.line([(cx - bw * 0.6, top + 3), (cx + bw * 0.6, top + 3)], fill=jitter(rng, (150, 85, 35), 8), width=max(2, int(s * 0.12)))
    elif marks == "patches":
        for _ in range(rng.integers(2, 5)):
            px, py, r = rng.uniform(cx - bw * 0.7, cx + bw * 0.7), rng.uniform(top, top + 2 * bh), s * rng.uniform(0.25, 0.5)
            d.ellipse([px - r, py - r * 0.8, px + r, py + r * 0.8], fill=second)
    elif marks == "saddle":
        d.chord([cx - bw * 0.8, top, cx + bw * 0.8, top + 1.4 * bh], 180, 360, fill=jitter(rng, colours[2], 8))
    # head
    hx, hy, hr = cx + facing * (bw + s * 0.35), top - s * 0.1, s * 0.6
    d.ellipse([hx - hr, hy - hr, hx + hr, hy + hr], fill=main)
    muzzle = hx + facing * hr * 0.9
    d.ellipse([muzzle - hr * 0.45, hy, muzzle + hr * 0.45, hy + hr * 0.6], fill=second if marks in ("mask", "tan_points") else main)
    d.ellipse([muzzle + facing * hr * 0.3 - 3, hy + 2, muzzle + facing * hr * 0.3 + 3, hy + 8], fill=(20, 15, 15))
    d.ellipse([hx + facing * hr * 0.3 - 3, hy - hr * 0.35 - 3, hx + facing * hr * 0.3 + 3, hy - hr * 0.35 + 3], fill=(15, 10, 10))
    ear_colour = second if marks in ("patches", "mask", "saddle", "tan_points") else main
    ex = hx - facing * hr * 0.3
    if ears == "pointed":
        d.polygon([(ex - hr * 0.4, hy - hr * 0.6), (ex + hr * 0.1, hy - hr * 0.7), (ex - hr * 0.2, hy - hr * 1.7)], fill=ear_colour)
    elif ears == "butterfly":
        d.polygon([(ex - hr * 0.5, hy - hr * 0.5), (ex + hr * 0.4, hy - hr * 0.6), (ex - hr * 0.9, hy - hr * 1.8)], fill=ear_colour)
        d.line([(ex - hr * 0.5, hy - hr * 1.0), (ex - hr * 1.2, hy - hr * 1.9)], fill=ear_colour, width=max(1, int(hr * 0.1)))
    elif ears == "long":
        d.ellipse([ex - hr * 0.3, hy - hr * 0.3, ex + hr * 0.3, hy + hr * 1.6], fill=ear_colour)
    else:  # floppy or feathered
        d.ellipse([ex - hr * 0.35, hy - hr * 0.5, ex + hr * 0.35, hy + hr * 0.8], fill=ear_colour)
        if ears == "feathered":
            for k in range(5):
                y = hy + hr * (0.1 + 0.15 * k)
                d.line([(ex - hr * 0.4, y), (ex - hr * 0.7, y + hr * 0.4)], fill=ear_colour, width=2)
    # coat length: fringes under the body, down to the floor for the longest coats
    if coat != "short":
        reach = ground if coat == "floor" else top + 2 * bh + leg_len * 0.5
        for x in np.arange(cx - bw * 0.9, cx + bw * 0.9, max(2.0, s * 0.08)):
            d.line([(x, top + 1.6 * bh), (x + rng.uniform(-2, 2), reach)], fill=jitter(rng, main, 12), width=2)
    img = img.filter(ImageFilter.GaussianBlur(rng.uniform(0.3, 1.0)))
    arr = np.asarray(img).astype(np.float64) * rng.uniform(0.8, 1.15) + rng.normal(0, 6, (h, w, 3))
    return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", nargs="?", default="data/stanford-dogs", type=pathlib.Path)
    p.add_argument("--breeds", type=int, default=6, help=f"how many breeds (1-{len(BREEDS)}, default 6)")
    p.add_argument("--per-breed", type=int, default=40)
    p.add_argument("--min-size", type=int, default=96, help="smallest short side in pixels")
    p.add_argument("--max-size", type=int, default=160, help="largest short side in pixels")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    out = a.out
    if (out / "Images").is_dir():
        print(f"{out}: Images/ exists, nothing to do")
        return 0
    if out.exists() and any(out.iterdir()):
        sys.exit(f"{out} exists and is not empty, but has no Images/: not overwriting it")
    if not 1 <= a.breeds <= len(BREEDS) or a.per_breed < 1 or not 16 <= a.min_size <= a.max_size:
        sys.exit(f"--breeds must be 1-{len(BREEDS)}, --per-breed at least 1, 16 <= --min-size <= --max-size")
    # A private folder for this run (two runs at once must not share one), renamed into place
    # whole at the end.
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    lines = []
    for b, breed in enumerate(BREEDS[: a.breeds]):
        folder = f"{breed[0]}-{breed[1]}"
        (tmp / "Images" / folder).mkdir(parents=True)
        lines.append(f"{folder}\t{breed[2]}\n")
        for k in range(a.per_breed):
            rng = np.random.default_rng([a.seed, b, k])
            short = int(rng.integers(a.min_size, a.max_size + 1))
            long = int(short * rng.uniform(1.2, 1.5))
            w, h = (long, short) if rng.uniform() < 0.75 else (short, long)
            draw_dog(breed, rng, w, h).save(tmp / "Images" / folder / f"{breed[0]}_{1000 + k}.jpg", "JPEG", quality=88)
    (tmp / "class_to_imagenet.tsv").write_text("".join(lines))
    if out.exists():
        out.rmdir()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp.rename(out)
    print(f"{out}: Stanford Dogs stand-in, {a.breeds} breeds x {a.per_breed} images")
    return 0


if __name__ == "__main__":
    sys.exit(main())
