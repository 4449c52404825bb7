#!/usr/bin/env python3
"""Generates a stand-in for the DesignSafe "Hurricane Harvey" house-damage set, with the real
set's layout, so that the course runs where the real photos are not available:

    OUT/Train/{C0,C2,C4}/*.jpg   OUT/Validation/{C0,C2,C4}/*.jpg

C0 = little or no damage, C2 = moderate damage, C4 = severe damage. Each picture is a
procedurally drawn house in a landscape; the damage level shows in the roof (intact, holes and
blue tarps, collapsed), debris on the ground, and flood water. Colours, scale, position,
lighting, camera tilt and noise vary, and the classes overlap on purpose (some intact houses
stand in shallow water, some moderately damaged ones hide their roof damage) so the task is
learnable but not trivial. Output is deterministic for a given --seed.

Defaults follow the real set: 1,322 training and 363 validation JPEGs around 640x480.
`--small` makes a tiny version for tests (30/12 per class at about 160x120).
"""
import argparse
import math
import pathlib
import random
import sys

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

CLASSES = ("C0", "C2", "C4")


def split_counts(total, k=3):
    base = [total // k] * k
    for i in range(total - sum(base)):
        base[i] += 1
    return base


def jitter(rng, colour, amount):
    return tuple(max(0, min(255, int(c + rng.uniform(-amount, amount)))) for c in colour)


def draw_sky_and_ground(draw, rng, w, h, horizon):
    top = jitter(rng, rng.choice([(110, 160, 220), (150, 160, 170), (185, 195, 205), (90, 120, 170)]), 25)
    bottom = jitter(rng, (200, 210, 220), 25)
    for y in range(horizon):
        t = y / max(1, horizon - 1)
        draw.line([(0, y), (w, y)], fill=tuple(int(a + (b - a) * t) for a, b in zip(top, bottom)))
    ground = jitter(rng, rng.choice([(90, 130, 60), (120, 140, 80), (110, 100, 80), (140, 130, 100)]), 20)
    draw.rectangle([0, horizon, w, h], fill=ground)
    for _ in range(rng.randint(0, 4)):  # trees / bushes
        x, r = rng.uniform(0, w), rng.uniform(0.03, 0.09) * w
        y = horizon + rng.uniform(-0.02, 0.05) * h
        draw.ellipse([x - r, y - 1.6 * r, x + r, y + 0.3 * r], fill=jitter(rng, (50, 95, 45), 20))


def house_geometry(rng, w, h, horizon):
    hw = rng.uniform(0.35, 0.6) * w
    hh = rng.uniform(0.22, 0.36) * h
    x0 = rng.uniform(0.05 * w, w - hw - 0.05 * w)
    base = horizon + rng.uniform(0.08, 0.22) * h
    return x0, base - hh, x0 + hw, base  # left, top, right, bottom of the walls


def draw_house(draw, rng, box, damage):
    left, top, right, bottom = box
    wall = jitter(rng, rng.choice([(225, 215, 195), (200, 190, 170), (180, 190, 200), (235, 230, 220), (170, 120, 90)]), 15)
    roof_colour = jitter(rng, rng.choice([(90, 70, 60), (70, 70, 75), (120, 60, 50), (60, 60, 60)]), 12)
    width, height = right - left, bottom - top
    roof_h = rng.uniform(0.35, 0.6) * height
    overhang = 0.05 * width
    if damage == 2:  # collapsed: walls lose height and the roof slumps sideways
        sag = rng.uniform(0.35, 0.6)
        top = bottom - height * (1 - sag)
        tilt = rng.uniform(-0.25, 0.25) * width
        draw.polygon([(left, bottom), (right, bottom), (right - 0.05 * width, top + 0.2 * height), (left + 0.1 * width, top)], fill=wall)
        roof = [(left - overhang + tilt * 0.3, top + 0.1 * height), (right + overhang, top + 0.3 * height), (left + width * 0.6 + tilt, top - roof_h * 0.4)]
        draw.polygon(roof, fill=roof_colour)
        for _ in range(rng.randint(4, 9)):  # broken beams
            x = rng.uniform(left, right)
            y = rng.uniform(top, bottom)
            ang = rng.uniform(0, math.pi)
            ln = rng.uniform(0.1, 0.3) * width
            draw.line([(x, y), (x + ln * math.cos(ang), y - ln * math.sin(ang))], fill=jitter(rng, (110, 85, 60), 20), width=rng.randint(3, 7))
        return top
    draw.rectangle([left, top, right, bottom], fill=wall)
    apex = rng.uniform(0.35, 0.65)
    draw.polygon([(left - overhang, top), (right + overhang, top), (left + apex * width, top - roof_h)], fill=roof_colour)
    win = jitter(rng, (60, 80, 100), 15)
    n_win = rng.randint(2, 4)
    for i in range(n_win):
        wx = left + (i + 0.5) * width / n_win
        ww, wh = 0.08 * width, 0.25 * height
        draw.rectangle([wx - ww, top + 0.25 * height, wx + ww, top + 0.25 * height + wh], fill=win)
        if damage == 1 and rng.random() < 0.4:  # broken window
            draw.line([(wx - ww, top + 0.25 * height), (wx + ww, top + 0.25 * height + wh)], fill=(20, 20, 20), width=3)
    dx = left + rng.uniform(0.2, 0.8) * width
    draw.rectangle([dx - 0.05 * width, bottom - 0.45 * height, dx + 0.05 * width, bottom], fill=jitter(rng, (100, 60, 40), 20))
    if damage == 1:  # holes and blue tarps on the roof
        for _ in range(rng.randint(1, 4)):
            t = rng.uniform(0.15, 0.85)
            cx = left + t * width
            cy = top - rng.uniform(0.15, 0.6) * roof_h * (1 - abs(t - apex))
            s = rng.uniform(0.05, 0.14) * width
            colour = jitter(rng, (40, 90, 200), 30) if rng.random() < 0.55 else jitter(rng, (30, 25, 20), 10)
            draw.polygon([(cx - s, cy), (cx + s * rng.uniform(0.5, 1), cy - s * 0.4), (cx + s, cy + s * 0.5), (cx - s * 0.6, cy + s * 0.6)], fill=colour)
    return top - roof_h


def draw_debris(draw, rng, w, h, horizon, amount):
    for _ in range(amount):
        x = rng.uniform(0, w)
        y = rng.uniform(horizon + 0.05 * h, h)
        s = rng.uniform(0.01, 0.04) * w
        colour = jitter(rng, rng.choice([(120, 90, 60), (150, 150, 150), (90, 80, 70), (200, 200, 190)]), 25)
        pts = [(x + s * math.cos(a) * rng.uniform(0.4, 1.2), y + s * 0.5 * math.sin(a) * rng.uniform(0.4, 1.2)) for a in np.linspace(0, 2 * math.pi, 6)[:-1]]
        draw.polygon(pts, fill=colour)


def draw_flood(img, rng, w, h, level):
    water = Image.new("RGB", (w, h), jitter(rng, (120, 100, 70), 15))
    mask = Image.new("L", (w, h), 0)
    md = ImageDraw.Draw(mask)
    y = int(h * (1 - level))
    md.rectangle([0, y, w, h], fill=int(rng.uniform(170, 230)))
    for x in range(0, w, max(4, w // 40)):  # ripples on the surface
        md.line([(x, y + rng.uniform(-3, 3)), (x + w // 40, y + rng.uniform(-3, 3))], fill=150, width=2)
    return Image.composite(water, img, mask)


def render(rng, damage, w, h):
    img = Image.new("RGB", (w, h))
    draw = ImageDraw.Draw(img)
    horizon = int(rng.uniform(0.35, 0.55) * h)
    draw_sky_and_ground(draw, rng, w, h, horizon)
    box = house_geometry(rng, w, h, horizon)
    draw_house(draw, rng, box, damage)
    debris = {0: rng.choice([0, 0, 0, 2, 5]), 1: rng.randint(4, 18), 2: rng.randint(15, 40)}[damage]
    draw_debris(draw, rng, w, h, horizon, debris)
    flood_p = {0: 0.15, 1: 0.35, 2: 0.75}[damage]
    if rng.random() < flood_p:
        level = {0: rng.uniform(0.05, 0.15), 1: rng.uniform(0.1, 0.3), 2: rng.uniform(0.2, 0.45)}[damage]
        img = draw_flood(img, rng, w, h, level)
    if rng.random() < 0.5:
        img = img.rotate(rng.uniform(-6, 6), resample=Image.BILINEAR, expand=False, fillcolor=jitter(rng, (128, 128, 128), 40))
    arr = np.asarray(img, dtype=np.float32)
    light = rng.uniform(0.6, 1.3)
    cast = np.array([rng.uniform(0.85, 1.15) for _ in range(3)], dtype=np.float32)
    noise = np.random.default_rng(rng.getrandbits(32)).normal(0, rng.uniform(2, 12), arr.shape).astype(np.float32)
    arr = np.clip(arr * light * cast + noise, 0, 255).astype(np.uint8)
    img = Image.fromarray(arr)
    if rng.random() < 0.3:
        img = img.filter(ImageFilter.GaussianBlur(rng.uniform(0.3, 1.5)))
    return img


def generate(out, n_train, n_val, width, height, seed):
    written = 0
    for split, total in (("Train", n_train), ("Validation", n_val)):
        for damage, (cls, count) in enumerate(zip(CLASSES, split_counts(total))):
            folder = out / split / cls
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(count):
                rng = random.Random(f"{seed}/{split}/{cls}/{i}")
                w = int(width * rng.uniform(0.85, 1.15))
                h = int(height * rng.uniform(0.85, 1.15))
                render(rng, damage, w, h).save(folder / f"{cls.lower()}_{i:05d}.jpg", quality=rng.randint(80, 94))
                written += 1
    return written


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", nargs="?", default="data/designsafe/Dataset_2", type=pathlib.Path)
    parser.add_argument("--train", type=int, default=1322, help="training images in all (split evenly over C0/C2/C4)")
    parser.add_argument("--val", type=int, default=363, help="validation images in all")
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--seed", type=int, default=2017)
    parser.add_argument("--small", action="store_true", help="tiny version for tests: 90 train / 36 val at ~160x120")
    parser.add_argument("--force", action="store_true", help="regenerate even if OUT exists")
    args = parser.parse_args()
    if args.small:
        args.train, args.val, args.width, args.height = 90, 36, 160, 120
    marker = args.out / "STANDIN"
    spec = f"stand-in seed={args.seed} train={args.train} val={args.val} size={args.width}x{args.height}\n"
    if not args.force and marker.exists() and marker.read_text() == spec:
        print(f"designsafe: {args.out} already holds this stand-in; nothing to do")
        return
    if not args.force and (args.out / "Train").exists() and not marker.exists():
        sys.exit(f"designsafe: {args.out} holds other data (the real set?); not overwriting (use --force)")
    n = generate(args.out, args.train, args.val, args.width, args.height, args.seed)
    marker.write_text(spec)
    print(f"designsafe: wrote {n} stand-in JPEGs to {args.out} ({args.train} train / {args.val} validation)")


if __name__ == "__main__":
    main()
