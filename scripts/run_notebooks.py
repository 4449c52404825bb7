#!/usr/bin/env python3
"""Executes trainbook's notebooks headless, top to bottom, in the `trainbook` Jupyter kernel.

    .venv/bin/python scripts/run_notebooks.py [NOTEBOOK ...] [--out DIR] [--cell-timeout S]

Without arguments it runs every notebooks/*.ipynb in name order, so a new notebook is picked up
by the tests automatically. Executed copies (with their outputs) go to --out, default
target/notebooks/, where tests can inspect the pictures they produced. Fails on any cell error.
"""
import argparse
import pathlib
import sys
import time

import nbformat
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

ROOT = pathlib.Path(__file__).resolve().parent.parent


def error_outputs(nb):
    """Cells whose outputs carry an error (evcxr reports compile errors this way too)."""
    for index, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                yield index, f"{out.get('ename', '')}: {out.get('evalue', '')}".strip()


def run_one(path, out_dir, cell_timeout):
    nb = nbformat.read(path, as_version=4)
    kernel = nb.metadata.get("kernelspec", {}).get("name", "trainbook")
    try:
        KernelSpecManager().get_kernel_spec(kernel)
    except NoSuchKernel:
        return f"kernel {kernel!r} is not installed: run `make setup` (scripts/setup.sh) first"
    client = NotebookClient(
        nb,
        kernel_name=kernel,
        timeout=cell_timeout,
        startup_timeout=120,
        allow_errors=False,
        resources={"metadata": {"path": str(path.parent)}},
    )
    failure = None
    try:
        client.execute()
    except CellTimeoutError as e:
        failure = f"a cell ran longer than {cell_timeout} s: {str(e)[:500]}"
    except DeadKernelError as e:
        failure = f"the kernel died: {e}"
    except CellExecutionError as e:
        failure = str(e)[-3000:]
    finally:
        out_dir.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, out_dir / path.name)
    if failure is None:
        errors = list(error_outputs(nb))
        if errors:
            failure = "; ".join(f"cell {i}: {msg}" for i, msg in errors)
    return failure


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", type=pathlib.Path)
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "target" / "notebooks")
    parser.add_argument("--cell-timeout", type=int, default=1800)
    args = parser.parse_args()
    paths = [p.resolve() for p in args.notebooks] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    if not paths:
        print("no notebooks found under notebooks/", file=sys.stderr)
        return 1
    passed, failed = 0, 0
    for path in paths:
        start = time.monotonic()
        print(f"notebook {path.name}: running", flush=True)
        failure = run_one(path, args.out, args.cell_timeout)
        seconds = time.monotonic() - start
        if failure:
            failed += 1
            print(f"notebook {path.name}: FAILED after {seconds:.0f} s\n{failure}", flush=True)
        else:
            passed += 1
            print(f"notebook {path.name}: ok in {seconds:.0f} s", flush=True)
    print(f"notebooks: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
