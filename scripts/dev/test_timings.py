#!/usr/bin/env python3
"""Where `make test`'s time goes: its phases, its slowest tests, and its Python processes.

    python3 scripts/dev/test_timings.py [--top N] [--markdown] [--junit FILE ...] [--phases FILE]
                                        [--python DIR]

Reads what the last run left in target/: the phases' seconds (target/test-phases.tsv, written
by scripts/dev/phase.sh), every test's wall time from nextest's JUnit reports
(target/nextest/default/junit.xml for `make test`, target/nextest/long/junit.xml for `make
test-long`) and, after `make test-timings`, one line per Python process the tests started
(target/py-account/, scripts/dev/pyaccount/sitecustomize.py). `make test` prints its summary
(the ten slowest); `--markdown` prints the tables of docs/src/contributing.md. Only Python's
standard library: it runs before and without the venv.
"""
import argparse
import collections
import json
import pathlib
import sys
import xml.etree.ElementTree as ET

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent


def read_phases(path):
    """[(name, seconds, exit status)] in the order the phases ran; a phase run twice keeps both."""
    if not path.exists():
        return []
    phases = []
    for line in path.read_text().splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and parts[1].isdigit():
            phases.append((parts[0], int(parts[1]), int(parts[2])))
    return phases


def read_junit(paths):
    """[(seconds, binary, test, outcome)] of every test case in nextest's JUnit files."""
    cases = []
    for path in paths:
        try:
            root = ET.parse(path).getroot()
        except (OSError, ET.ParseError):  # no report (yet), or an empty one
            continue
        for case in root.iter("testcase"):
            outcome = "passed"
            for child in case:
                if child.tag in ("failure", "error"):
                    outcome = "FAILED"
                elif child.tag == "skipped":
                    outcome = "skipped"
            cases.append((float(case.get("time", "0")), case.get("classname", ""), case.get("name", ""), outcome))
    return cases


def read_python(directory):
    """{script: [count, cpu seconds, wall seconds, importing torch, forked by the oracle server]}
    over the accounted processes."""
    by_script = collections.defaultdict(lambda: [0, 0.0, 0.0, 0, 0])
    if not directory.is_dir():
        return {}
    for path in directory.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            row = by_script[rec.get("script", "-")]
            row[0] += 1
            row[1] += rec.get("cpu_s", 0.0)
            row[2] += rec.get("wall_s", 0.0)
            forked = bool(rec.get("forked"))
            row[3] += 1 if rec.get("torch") and not forked else 0
            row[4] += 1 if forked else 0
    return dict(by_script)


def minutes(seconds):
    return f"{int(seconds) // 60} min {int(seconds) % 60:02d} s"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--top", type=int, default=10, help="how many of the slowest tests (default 10)")
    parser.add_argument("--markdown", action="store_true", help="tables for docs/src/contributing.md")
    parser.add_argument("--junit", type=pathlib.Path, nargs="*",
                        default=[ROOT / "target/nextest/default/junit.xml"])
    parser.add_argument("--phases", type=pathlib.Path, default=ROOT / "target/test-phases.tsv")
    parser.add_argument("--python", type=pathlib.Path, default=ROOT / "target/py-account")
    args = parser.parse_args()

    phases = read_phases(args.phases)
    cases = sorted(read_junit(args.junit), reverse=True)
    python = read_python(args.python)
    md = args.markdown

    if phases:
        total = sum(p[1] for p in phases)
        if md:
            print("| phase | time | exit |\n| --- | --- | --- |")
            for name, seconds, status in phases:
                print(f"| {name} | {minutes(seconds)} | {status} |")
            print(f"| **all** | **{minutes(total)}** | |\n")
        else:
            print(f"phases ({minutes(total)} in all): " + ", ".join(
                f"{name} {seconds} s" + ("" if status == 0 else f" (exit {status})") for name, seconds, status in phases))
    if cases:
        busy = sum(c[0] for c in cases)
        top = cases[: args.top]
        if md:
            print(f"| test (binary, name) | wall time | outcome |\n| --- | --- | --- |")
            for seconds, binary, name, outcome in top:
                print(f"| `{binary}` `{name}` | {seconds:.0f} s | {outcome} |")
            print(f"\n{len(cases)} tests, {busy:.0f} s of test time in all (tests run side by side).\n")
        else:
            print(f"the {len(top)} slowest of {len(cases)} tests (wall time, tests side by side; {busy:.0f} s in all):")
            for seconds, binary, name, outcome in top:
                print(f"  {seconds:7.1f} s  {binary} {name}" + ("" if outcome == "passed" else f"  [{outcome}]"))
    if python:
        count = sum(r[0] for r in python.values())
        cpu = sum(r[1] for r in python.values())
        torch = sum(r[3] for r in python.values())
        forked = sum(r[4] for r in python.values())
        rows = sorted(python.items(), key=lambda kv: -kv[1][1])
        if md:
            print("| Python script | processes | CPU time | importing torch | forked by the oracle server |")
            print("| --- | --- | --- | --- | --- |")
            for script, (n, c, _w, t, f) in rows[: args.top]:
                print(f"| `{script}` | {n} | {c:.0f} s | {t} | {f} |")
            print(f"\n{count} Python processes, {cpu:.0f} CPU-seconds: {torch} imported torch themselves, "
                  f"{forked} were oracles forked by the oracle server (torch imported once, by the server).\n")
        else:
            print(f"Python processes: {count}, {cpu:.0f} CPU-seconds; {torch} imported torch, "
                  f"{forked} oracles forked by the oracle server; the most CPU:")
            for script, (n, c, _w, _t, _f) in rows[: min(args.top, 5)]:
                print(f"  {c:7.0f} s  {n:4d} x {script}")
    if not (phases or cases or python):
        print("test_timings: nothing recorded yet (run make test)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
