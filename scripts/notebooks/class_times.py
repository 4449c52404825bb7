#!/usr/bin/env python3
"""How long each notebook takes when a class runs it at once on one node.

    .venv/bin/python scripts/notebooks/class_times.py [--students N] [NOTEBOOK ...]
    make class-times [STUDENTS=3]

Makes N student workspaces (scripts/notebooks/workspace.py) in a temporary folder, then, one
notebook after another, runs it top to bottom at its committed settings in all N workspaces at
the same moment (scripts/notebooks/run_notebooks.py, one process per student) and records each
student's wall time, from starting the kernel to the last cell. Without NOTEBOOK names, every
notebook of the course. The figures go to target/bench/class_times.json (with the CPU count and
the date) and to the terminal; the instructors' page quotes them.
"""
import argparse
import concurrent.futures
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", help="file names under notebooks/ (default: all)")
    parser.add_argument("--students", type=int, default=3)
    parser.add_argument("--json", type=pathlib.Path, default=ROOT / "target" / "bench" / "class_times.json")
    args = parser.parse_args()
    if args.students < 1:
        print("class_times: --students must be at least 1", file=sys.stderr)
        return 2
    names = args.notebooks or sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))
    missing = [n for n in names if not (ROOT / "notebooks" / n).is_file()]
    if missing:
        print(f"class_times: no such notebook under notebooks/: {', '.join(missing)}", file=sys.stderr)
        return 2
    figures = {"students": args.students, "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d"),
               "seconds": {}}
    with tempfile.TemporaryDirectory(prefix="class-times-") as tmp:
        spaces = [pathlib.Path(tmp) / f"student-{k + 1}" for k in range(args.students)]
        for ws in spaces:
            subprocess.run([sys.executable, str(ROOT / "scripts/notebooks/workspace.py"), str(ws)],
                           check=True, stdout=subprocess.DEVNULL)
        for name in names:
            def run(ws):
                start = time.monotonic()
                done = subprocess.run([sys.executable, str(ROOT / "scripts/notebooks/run_notebooks.py"),
                                       str(ws / "notebooks" / name), "--out", str(ws / "executed")],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                return round(time.monotonic() - start, 1), done

            with concurrent.futures.ThreadPoolExecutor(len(spaces)) as pool:
                results = list(pool.map(run, spaces))
            for k, (_, done) in enumerate(results):
                if done.returncode != 0:
                    print(f"class_times: {name} failed for student {k + 1}:\n{done.stdout[-3000:]}", file=sys.stderr)
                    return 1
            seconds = [s for s, _ in results]
            figures["seconds"][name] = seconds
            print(f"{name}: {args.students} at once: {', '.join(f'{s:.0f} s' for s in seconds)}", flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(figures, indent=1) + "\n")
    print(f"class_times: written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
