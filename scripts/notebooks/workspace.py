#!/usr/bin/env python3
"""A student's own workspace on a class's shared (possibly read-only) trainbook checkout.

    python3 scripts/notebooks/workspace.py DIR [--gpus LIST | --share K/N] [--threads T] [--name NAME]
    make workspace DIR=~/trainbook [GPUS=0,1 | SHARE=2/3] [THREADS=T]

Every notebook reads and writes relative to itself (`../data/...`, `../runs/...`), and 04, 05
and 06 start by deleting their run folder; students who open the shared checkout's notebooks
would share, and delete, each other's runs. DIR gets what a student needs to work alone, and
nothing in the checkout is written:

    DIR/notebooks/NN-*.ipynb   the student's own copies; their `:dep` line names the checkout
                               (the same line the class's kernel cache was built with, so the
                               first cell copies compiled crates), and a first cell says where
                               this workspace's files go and which GPUs it has
    DIR/notebooks/figures      -> the checkout's (the notebooks' diagrams)
    DIR/data/NAME              -> the checkout's data/NAME, each data set linked, read-only to
                               the student; a data set the checkout lacks is made here on first use
    DIR/runs/                  the student's runs and checkpoints
    DIR/examples, docs, launchers, data-scripts  -> the checkout's (read by cells and links)
    DIR/trainbook-workspace.json  the checkout's path (`trainbook::launch::example_binary` reads
                               it and finds the examples the instructor built there) and the GPUs
    DIR/jupyter.sh             starts the checkout's Jupyter in DIR/notebooks with this
                               workspace's GPUs (CUDA_VISIBLE_DEVICES)

GPUs: `--gpus 2,3` gives these; `--share K/N` gives student K of N their share of the GPUs
`nvidia-smi -L` lists (N students on G >= N GPUs: a block of G/N each; on fewer GPUs than
students, GPU (K-1) mod G, shared). Without either, a new workspace keeps the node's default and
an existing one the GPUs it was given.

CPU threads: `--share K/N` also gives each kernel its share of the node's cores,
`OMP_NUM_THREADS` = cores // N (at least 1), which libtorch reads when the kernel starts;
`--threads T` sets it alone. Measured: three students running notebook 03 at once on 2 cores
took 1159-1197 s each with libtorch's default (a thread per core in every kernel) and 522-528 s
with one thread each (`make class-times`, docs/src/instructors.md).

Run again, it adds what is missing and never overwrites a student's notebook or run
(`--refresh-notebooks` replaces the notebooks with fresh copies, keeping the old ones as
`*.ipynb.bak`). Exits 2 with a message naming the problem on bad input.
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
MARKER = "trainbook-workspace.json"
LINKED = ["examples", "docs", "launchers", "data-scripts"]
DEP_RE = re.compile(r"^:dep trainbook = \{[^\n]*\}$", re.M)


class Refused(Exception):
    """Bad input: the message names it."""


def plain_dep_line(checkout):
    """The line without a class cache: kernel_cache.py's (the `cuda` feature under
    TRAINBOOK_CUDA=1)."""
    sys.path.insert(0, str(ROOT / "scripts" / "kernel"))
    from kernel_cache import dep_line as cache_dep_line  # stdlib-only at import

    return cache_dep_line(checkout=checkout)


def class_cache(checkout):
    """The kernel cache the checkout's kernelspec names (what a student's kernel seeds from)."""
    spec = checkout / ".venv" / "share" / "jupyter" / "kernels" / "trainbook" / "kernel.json"
    try:
        value = json.loads(spec.read_text())["env"].get("TRAINBOOK_KERNEL_CACHE")
    except (OSError, ValueError, KeyError):
        return None
    return pathlib.Path(value) if value else None


def dep_line(checkout):
    """The `:dep` line for the students' notebooks: the one the class's kernel cache was built
    with when there is one (then the first cell copies the compiled crates; a cache built with
    TRAINBOOK_CUDA=1 has the `cuda` feature), else `plain_dep_line`."""
    cache = class_cache(checkout)
    if cache is not None:
        try:
            line = json.loads((cache / "current" / "kernel-cache.json").read_text())["dep_line"]
            if f'path = "{checkout}"' in line:
                return line, cache
        except (OSError, ValueError, KeyError):
            pass
    return plain_dep_line(checkout), cache


def gpu_count():
    """GPUs `nvidia-smi -L` lists (0 when there is no nvidia-smi)."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))


def share_of(k, n, count):
    """Student k of n (1-based): a block of count // n GPUs each (the last blocks one larger
    when it does not divide), or, on fewer GPUs than students, GPU (k-1) mod count."""
    if count == 0:
        return []
    if count >= n:
        return list(range((k - 1) * count // n, k * count // n))
    return [(k - 1) % count]


def parse_share(text):
    m = re.fullmatch(r"([1-9][0-9]*)/([1-9][0-9]*)", text or "")
    if not m or int(m.group(1)) > int(m.group(2)):
        raise Refused(f"--share {text!r}: expected K/N with 1 <= K <= N, e.g. 2/3 for the second of three students")
    return int(m.group(1)), int(m.group(2))


def parse_gpus(text):
    if not re.fullmatch(r"[0-9]+(,[0-9]+)*", text or ""):
        raise Refused(f"--gpus {text!r}: expected GPU indices separated by commas, e.g. 0,1")
    return [int(g) for g in text.split(",")]


def link(path, target, made):
    """A symlink path -> target, unless path already exists (kept as it is)."""
    if path.is_symlink() or path.exists():
        return
    path.symlink_to(target)
    made.append(f"{path} -> {target}")


def workspace_cell(ws, checkout, gpus, name, threads=None):
    lines = [
        f"**Your workspace{' (' + name + ')' if name else ''}:** `{ws}`. This copy of the notebook "
        f"saves its runs and checkpoints in `{ws / 'runs'}`, yours alone; the data sets are the "
        f"class's, linked read-only from `{checkout / 'data'}` (one the class lacks is made in "
        f"`{ws / 'data'}` on first use); the programs the notebooks start are the ones built in "
        f"`{checkout / 'target'}`.",
        "",
        "The outputs below are the ones committed with the course until you run a cell. Your own "
        "figures can differ from them in the last digits (another CPU's float32 kernels add in "
        "another order) and, after many steps, by more.",
        "",
    ]
    if gpus is None:
        lines.append("GPUs: the node's default (this workspace sets no `CUDA_VISIBLE_DEVICES`).")
    elif gpus:
        lines.append(f"GPUs: `CUDA_VISIBLE_DEVICES={','.join(map(str, gpus))}`, set by `{ws / 'jupyter.sh'}`, "
                     "which started this Jupyter: the notebooks' GPU number 0 is the first of these.")
    else:
        lines.append("GPUs: none (`nvidia-smi` lists none on this node): the notebooks run on the CPU.")
    if threads is not None:
        lines.append("")
        lines.append(f"CPU threads: `OMP_NUM_THREADS={threads}` for libtorch in this kernel, set by `{ws / 'jupyter.sh'}`: "
                     "this node's cores are shared with the other students.")
    cell = {"cell_type": "markdown", "metadata": {"tags": ["workspace"]}, "source": "\n".join(lines)}
    return cell


def copy_notebook(src, dst, dep, cell):
    nb = json.loads(src.read_text())
    deps = 0
    for c in nb["cells"]:
        if c["cell_type"] != "code":
            continue
        text = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        new, n = DEP_RE.subn(dep, text)
        if n:
            c["source"] = new
            deps += n
    if deps != 1:
        raise Refused(f"{src}: expected one `:dep trainbook = {{ ... }}` line, found {deps}")
    nb["cells"].insert(0, cell)
    tmp = dst.with_name(dst.name + ".tmp")
    tmp.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    os.replace(tmp, dst)


def make(ws, gpus, name, refresh=False, checkout=ROOT, threads=None):
    checkout = checkout.resolve()
    ws = ws.expanduser().absolute()
    if ws == checkout or checkout in ws.parents:
        raise Refused(f"{ws}: a workspace must lie outside the shared checkout {checkout}")
    if ws.exists() and not ws.is_dir():
        raise Refused(f"{ws}: exists and is not a folder")
    marker = ws / MARKER
    if ws.exists() and any(ws.iterdir()) and not marker.exists():
        raise Refused(f"{ws}: exists, is not empty and is not a trainbook workspace (no {MARKER}); "
                      "choose a new folder")
    if marker.exists():  # run again without a GPU or thread option: keep the ones it has
        try:
            before = json.loads(marker.read_text())
            gpus = before.get("gpus") if gpus is None else gpus
            threads = before.get("threads") if threads is None else threads
        except (OSError, ValueError, AttributeError):
            pass
    notebooks = sorted((checkout / "notebooks").glob("[0-9][0-9]-*.ipynb"))
    if not notebooks:
        raise Refused(f"{checkout / 'notebooks'}: no notebooks to copy")
    dep, cache = dep_line(checkout)
    made = []
    for sub in ["notebooks", "runs", "data"]:
        (ws / sub).mkdir(parents=True, exist_ok=True)
    link(ws / "notebooks" / "figures", checkout / "notebooks" / "figures", made)
    for sub in LINKED:
        link(ws / sub, checkout / sub, made)
    if (checkout / "data").is_dir():
        for entry in sorted((checkout / "data").iterdir()):
            if not entry.name.startswith("."):
                link(ws / "data" / entry.name, entry, made)
    cell = workspace_cell(ws, checkout, gpus, name, threads)
    kept, examples = [], set()
    for src in notebooks:
        examples.update(re.findall(r'example_binary\(\\?"(\w+)\\?"\)', src.read_text()))
        dst = ws / "notebooks" / src.name
        if dst.exists() and not refresh:
            kept.append(dst.name)
            continue
        if dst.exists():
            shutil.copy2(dst, dst.with_name(dst.name + ".bak"))
        copy_notebook(src, dst, dep, cell)
        made.append(str(dst))
    about = {
        "about": "a trainbook workspace, made by scripts/notebooks/workspace.py; trainbook's "
                 "example_binary finds the examples built in `checkout`",
        "checkout": str(checkout),
        "name": name or None,
        "gpus": gpus,
        "threads": threads,
    }
    marker.write_text(json.dumps(about, indent=1) + "\n")
    jupyter = ws / "jupyter.sh"
    env = [f"export TRAINBOOK_WORKSPACE={shell_quote(ws)}"]
    if gpus is not None:
        visible = ",".join(map(str, gpus)) or "''"
        env.append(f"export CUDA_VISIBLE_DEVICES={visible}")
    if threads is not None:
        env.append(f"export OMP_NUM_THREADS={threads}")
    jupyter.write_text("\n".join([
        "#!/usr/bin/env bash",
        "# Starts the class's Jupyter in this workspace's notebooks (scripts/notebooks/workspace.py).",
        "set -euo pipefail",
        *env,
        f"cd {shell_quote(ws / 'notebooks')}",
        f"exec {shell_quote(checkout / '.venv' / 'bin' / 'jupyter')} lab \"$@\"",
        "",
    ]))
    jupyter.chmod(0o755)
    return {"workspace": ws, "checkout": checkout, "dep_line": dep, "cache": cache, "gpus": gpus, "threads": threads,
            "made": made, "kept": kept, "examples": sorted(examples)}


def shell_quote(path):
    return "'" + str(path).replace("'", "'\\''") + "'"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir", type=pathlib.Path, help="the student's workspace (made if missing)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--gpus", help="this workspace's GPUs, e.g. 0,1")
    which.add_argument("--share", help="student K of N: their share of the node's GPUs, e.g. 2/3")
    parser.add_argument("--threads", type=int, default=None,
                        help="libtorch's CPU threads in this workspace's kernels (OMP_NUM_THREADS)")
    parser.add_argument("--gpu-count", type=int, default=None, help=argparse.SUPPRESS)  # tests: instead of nvidia-smi
    parser.add_argument("--cpu-count", type=int, default=None, help=argparse.SUPPRESS)  # tests: instead of the node's
    parser.add_argument("--name", default="", help="the student's name, shown in the notebooks' first cell")
    parser.add_argument("--refresh-notebooks", action="store_true",
                        help="replace the notebooks with fresh copies (the old ones kept as *.ipynb.bak)")
    args = parser.parse_args(argv)
    try:
        gpus, threads = None, args.threads
        if threads is not None and threads < 1:
            raise Refused(f"--threads {threads}: expected at least 1")
        if args.gpus is not None:
            gpus = parse_gpus(args.gpus)
        elif args.share is not None:
            k, n = parse_share(args.share)
            gpus = share_of(k, n, gpu_count() if args.gpu_count is None else args.gpu_count)
            if threads is None:
                threads = max(1, (args.cpu_count or os.cpu_count() or 1) // n)
        result = make(args.dir, gpus, args.name, args.refresh_notebooks, threads=threads)
    except Refused as e:
        print(f"workspace: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"workspace: {e.filename or args.dir}: {e.strerror}", file=sys.stderr)
        return 2
    ws = result["workspace"]
    print(f"workspace: {ws} (checkout {result['checkout']})")
    if result["kept"]:
        print(f"  kept as they were: {', '.join(result['kept'])} (--refresh-notebooks replaces them)")
    print(f"  notebooks' first line: {result['dep_line']}")
    if result["cache"] is None:
        print("  no class kernel cache named by the checkout's kernelspec: a first `:dep` cell compiles trainbook (minutes)")
    absent = [e for e in result["examples"] if not any(
        (result["checkout"] / "target" / p / "examples" / e).is_file() for p in ("release", "debug"))]
    if absent:
        print(f"  not built in the checkout yet: examples {', '.join(absent)} (the instructor's `make setup-notebook` builds them)")
    gpus = result["gpus"]
    if gpus is None:
        print("  GPUs: the node's default")
    else:
        print(f"  GPUs: {','.join(map(str, gpus)) if gpus else 'none'} (CUDA_VISIBLE_DEVICES in jupyter.sh)")
    if result["threads"] is not None:
        print(f"  CPU threads: {result['threads']} (OMP_NUM_THREADS in jupyter.sh)")
    print(f"  start: {ws / 'jupyter.sh'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
