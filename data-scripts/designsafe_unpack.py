#!/usr/bin/env python3
"""Unpacks the real DesignSafe "Hurricane Harvey" archive for users who have it:

    python3 data-scripts/designsafe_unpack.py path/to/data.tar.gz [OUT_PARENT]

The archive holds Dataset_2/{Train,Validation}/{C0,C2,C4}/...; it is extracted under OUT_PARENT
(default data/designsafe), so the course finds data/designsafe/Dataset_2. The layout is checked
afterwards and the image count of every split and class printed. Without the archive, use
data-scripts/designsafe_standin.py to generate a stand-in with the same layout.
"""
import pathlib
import sys
import tarfile

SPLITS = ("Train", "Validation")
CLASSES = ("C0", "C2", "C4")
EXTENSIONS = {".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff"}


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    archive = pathlib.Path(sys.argv[1])
    parent = pathlib.Path(sys.argv[2] if len(sys.argv) == 3 else "data/designsafe")
    if not archive.is_file():
        sys.exit(f"designsafe: {archive} not found")
    parent.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(parent, filter="data")  # refuses absolute paths and links outside
    except (tarfile.TarError, OSError) as e:
        sys.exit(f"designsafe: cannot extract {archive}: {e}")
    root = parent / "Dataset_2"
    problems = []
    for split in SPLITS:
        for cls in CLASSES:
            folder = root / split / cls
            n = sum(1 for p in folder.rglob("*") if p.suffix.lower() in EXTENSIONS) if folder.is_dir() else 0
            print(f"designsafe: {split}/{cls}: {n} images")
            if n == 0:
                problems.append(f"{folder} is missing or has no images")
    if problems:
        sys.exit("designsafe: the archive does not have the expected layout:\n  " + "\n  ".join(problems))
    print(f"designsafe: ready at {root}")


if __name__ == "__main__":
    main()
