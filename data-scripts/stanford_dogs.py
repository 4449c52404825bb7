#!/usr/bin/env python3
"""Fetches the real Stanford Dogs data set (Khosla et al., 120 breeds, 20,580 photos; images.tar,
about 760 MB) and unpacks it as examples/dogs reads it:

    OUT/Images/n02085620-Chihuahua/n02085620_10074.jpg ...
    OUT/class_to_imagenet.tsv        each breed folder and its index among ImageNet-1k's classes

The map is made by name, as the Dask tutorial's `replace_label` does, but against torchvision's
list of ImageNet categories (`ResNet50_Weights.IMAGENET1K_V2.meta["categories"]`, no download):
the folder's name after the WordNet id, underscores read as spaces, compared without regard to
case. A breed whose name matches no category, or more than one, is an error that names it (edit
the file by hand then: one `folder<TAB>index` a line). With --map-only the images are not
fetched and the map is written for an OUT/Images that exists already.

Needs the network for the images (offline it says so and stops); the map needs torchvision.
"""
import argparse
import pathlib
import sys
import tarfile

from download import download

URL = "http://vision.stanford.edu/aditya86/ImageNetDogs/images.tar"


def imagenet_categories():
    try:
        from torchvision.models import ResNet50_Weights
    except ImportError:
        sys.exit("stanford_dogs.py: the class map needs torchvision (pip install torchvision)")
    return ResNet50_Weights.IMAGENET1K_V2.meta["categories"]


def breed_name(folder):
    """`n02085782-Japanese_spaniel` -> `japanese spaniel`"""
    head, sep, rest = folder.partition("-")
    name = rest if sep and head[:1] == "n" and head[1:].isdigit() else folder
    return name.replace("_", " ").strip().lower()


def class_map(folders, categories):
    """{folder: ImageNet index}; exits naming every folder without exactly one match."""
    by_name = {}
    for idx, cat in enumerate(categories):
        by_name.setdefault(cat.strip().lower(), []).append(idx)
    out, problems = {}, []
    for folder in folders:
        hits = by_name.get(breed_name(folder), [])
        if len(hits) == 1:
            out[folder] = hits[0]
        else:
            problems.append(f"{folder}: {'no' if not hits else len(hits)} ImageNet categories named {breed_name(folder)!r}")
    if problems:
        sys.exit("stanford_dogs.py: cannot map these breeds onto ImageNet's classes:\n  " + "\n  ".join(problems))
    return out


def fetch(out):
    tar_path = out / "images.tar"
    download(URL, tar_path, "760 MB", "stanford_dogs.py", f"python data-scripts/stanford_dogs_standin.py {out}")
    print(f"unpacking {tar_path} ...", flush=True)
    with tarfile.open(tar_path) as tar:
        tar.extractall(out, filter="data")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", nargs="?", default="data/stanford-dogs", type=pathlib.Path)
    p.add_argument("--map-only", action="store_true", help="only write class_to_imagenet.tsv for OUT/Images")
    a = p.parse_args()
    out = a.out
    out.mkdir(parents=True, exist_ok=True)
    if not a.map_only and not (out / "Images").is_dir():
        fetch(out)
    images = out / "Images"
    if not images.is_dir():
        sys.exit(f"stanford_dogs.py: {images} does not exist")
    folders = sorted(d.name for d in images.iterdir() if d.is_dir())
    mapping = class_map(folders, imagenet_categories())
    (out / "class_to_imagenet.tsv").write_text("".join(f"{f}\t{mapping[f]}\n" for f in folders))
    print(f"{out}: {len(folders)} breeds; wrote class_to_imagenet.tsv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
