#!/usr/bin/env python3
"""Fetches the real Tiny ImageNet 200 (Stanford CS231n: 200 classes, 100,000 training, 10,000
validation and 10,000 unlabelled test images of 64x64; tiny-imagenet-200.zip, about 240 MB) and
unpacks it as it comes, which is the layout trainbook's `TinyImageNet` reads (no restructuring):

    OUT/wnids.txt  OUT/words.txt  OUT/train/<wnid>/images/*.JPEG
    OUT/val/images/*.JPEG  OUT/val/val_annotations.txt  OUT/test/images/*.JPEG

OUT defaults to data/tiny-imagenet-200. Needs the network (offline it says so and stops; the
stand-in is data-scripts/tiny_imagenet_standin.py).
"""
import argparse
import pathlib
import shutil
import sys
import zipfile

from download import download

URL = "http://cs231n.stanford.edu/tiny-imagenet-200.zip"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", nargs="?", default="data/tiny-imagenet-200", type=pathlib.Path)
    p.add_argument("--url", default=URL)
    a = p.parse_args()
    out = a.out
    if (out / "wnids.txt").exists():
        print(f"{out}: wnids.txt exists, nothing to do")
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    archive = out.parent / "tiny-imagenet-200.zip"
    download(a.url, archive, "240 MB", "tiny_imagenet.py", f"python data-scripts/tiny_imagenet_standin.py {out}")
    print(f"unpacking {archive} ...", flush=True)
    tmp = out.parent / f".{out.name}.unpack"
    shutil.rmtree(tmp, ignore_errors=True)
    with zipfile.ZipFile(archive) as z:
        z.extractall(tmp)
    inner = tmp / "tiny-imagenet-200"
    if not (inner / "wnids.txt").exists():
        sys.exit(f"tiny_imagenet.py: {archive} does not hold tiny-imagenet-200/wnids.txt")
    if out.exists():
        out.rmdir()  # empty (checked above that it holds no data set); fails loudly otherwise
    inner.rename(out)
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"{out}: Tiny ImageNet 200 unpacked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
