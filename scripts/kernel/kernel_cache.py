#!/usr/bin/env python3
"""The notebook kernel's prebuilt cache: what `:dep trainbook` compiles, built once and copied
into every new kernel's build directory, so a user's first cell does not compile tch and
trainbook again.

    .venv/bin/python scripts/kernel/kernel_cache.py build [--cache DIR]
    .venv/bin/python scripts/kernel/kernel_cache.py time [--cache DIR] [--json FILE] [--students N]
    .venv/bin/python scripts/kernel/kernel_cache.py check [--cache DIR]
    python3 scripts/kernel/kernel_cache.py dep-line        (the `:dep` line a build uses)

`build` (what `make setup-notebook` runs) starts the `trainbook` kernel once in a scratch build
directory, runs the notebooks' `:dep trainbook` line and one cell, and publishes that build
directory as a new version of the cache: DIR/v-<time>/ plus the symlink DIR/current, switched
atomically, so kernels that are copying the previous version are not disturbed. When a version
already exists the scratch directory starts from a copy of it, so a rebuild after a trainbook
change recompiles only what changed. Builds take a lock (DIR/.build.lock); kernels never do.

scripts/kernel/trainbook-kernel (the kernelspec's program) seeds each new build slot from
DIR/current with `cp -a --reflink=auto` before evcxr starts (TRAINBOOK_KERNEL_CACHE names DIR
in the kernelspec; the default is ~/.cache/trainbook/kernel-cache). An instructor builds DIR
once on a shared file system and every student's kernel copies from it.

`time` measures what a user sees: a kernel with a brand-new build-slot root (a new user), its
`:dep` line plus one cell; then a second kernel in the same slot (a warm start). It writes the
figures as JSON (default target/bench/notebook_kernel.json). `check` (tests/tooling/kernel_cache.rs)
brings the cache up to date, then starts two kernels at once in new slots and fails unless both
were seeded and cargo compiled no dependency again.
"""
import argparse
import contextlib
import fcntl
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent


def dep_line(cuda=None, checkout=None):
    """The line every notebook starts with; evcxr makes the path absolute (canonical), so building
    with the canonical checkout path gives the same dependency as a notebook under notebooks/.
    With TRAINBOOK_CUDA=1 (a GPU node's set-up) it asks for the `cuda` feature (NCCL), and the
    students' workspaces (scripts/notebooks/workspace.py) copy the line the cache was built with.
    `checkout`: another checkout's path instead of this one's."""
    if cuda is None:
        cuda = os.environ.get("TRAINBOOK_CUDA", "") not in ("", "0")
    features = ', features = ["cuda"]' if cuda else ""
    return f':dep trainbook = {{ path = "{checkout or ROOT.resolve()}", default-features = false{features} }}'


DEP_LINE = dep_line()
FIRST_CELL = 'println!("{}", trainbook::versions());'


def default_cache():
    env = os.environ.get("TRAINBOOK_KERNEL_CACHE")
    if env:
        return pathlib.Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return pathlib.Path(base) / "trainbook" / "kernel-cache"


def run_cells(cells, env, timeout=3600):
    """Starts the trainbook kernel with `env`, runs `cells` in order and returns the seconds each
    took (kernel start first). Raises with the kernel's output when a cell fails."""
    from jupyter_client.manager import start_new_kernel

    start = time.monotonic()
    km, kc = start_new_kernel(kernel_name="trainbook", startup_timeout=120, cwd=str(ROOT / "notebooks"), env=env)
    times = [time.monotonic() - start]
    try:
        for code in cells:
            printed = []
            start = time.monotonic()
            reply = kc.execute_interactive(code, timeout=timeout, output_hook=printed.append)
            times.append(time.monotonic() - start)
            if reply["content"]["status"] != "ok":
                text = "".join(m["content"].get("text", "") for m in printed)
                raise RuntimeError(f"cell {code[:60]!r} failed: {reply['content'].get('evalue', '')}\n{text[-2000:]}")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    return times


def kernel_env(slot_root, cache):
    """The environment that makes the kernel put its build slots under `slot_root` and seed them
    from `cache` (None: no seeding, a cold build)."""
    env = dict(os.environ, TRAINBOOK_KERNEL_SLOTS=str(slot_root))
    env["TRAINBOOK_KERNEL_CACHE"] = str(cache) if cache else ""
    return env


def kernelspec_cache():
    """The shared cache the installed kernelspec names (it overrides the environment), or None."""
    from jupyter_client.kernelspec import KernelSpecManager

    value = KernelSpecManager().get_kernel_spec("trainbook").env.get("TRAINBOOK_KERNEL_CACHE")
    return pathlib.Path(value) if value else None


def compiled_dependencies(slot):
    """Name, size and modification time of every compiled dependency in an evcxr build directory
    (not the cells' own crate, `ctx`, which evcxr rebuilds for every cell): equal before and after
    a kernel run exactly when cargo rebuilt none of them."""
    found = set()
    for path in (slot / "target").glob("**/deps/*"):
        if path.is_file() and not path.name.startswith(("ctx", "libctx")):
            stat = path.stat()
            found.add((str(path.relative_to(slot)), stat.st_size, stat.st_mtime_ns))
    return found


def disk_bytes(path):
    out = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0])


@contextlib.contextmanager
def build_lock(cache):
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".build.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"kernel cache: another build of {cache} is running; waiting for it", flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def build(cache):
    """Builds a new version of the cache and makes it current. Returns its directory."""
    with build_lock(cache):
        previous = cache / "current"
        scratch = pathlib.Path(tempfile.mkdtemp(prefix="build-", dir=cache))
        slot = scratch / "slot-0"
        if previous.exists():
            # Start from the current version: cargo then rebuilds only what changed.
            subprocess.run(["cp", "-a", "--reflink=auto", str(previous.resolve()), str(slot)], check=True)
            (slot / ".seeded-from").unlink(missing_ok=True)
        before = compiled_dependencies(slot)
        start = time.monotonic()
        try:
            times = run_cells([DEP_LINE, FIRST_CELL], kernel_env(scratch, None))
        except Exception:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        seconds = time.monotonic() - start
        if before and compiled_dependencies(slot) == before:
            shutil.rmtree(scratch, ignore_errors=True)
            print(f"ok: kernel cache {previous.resolve()} (cargo found nothing to rebuild)", flush=True)
            return previous.resolve()
        (slot / ".lock").unlink(missing_ok=True)
        # rustc's incremental caches only speed up edits of trainbook itself, and grow with every
        # build: every seeded slot would copy them (about a third of the cache).
        for incremental in (slot / "target").glob("**/debug/incremental"):
            shutil.rmtree(incremental, ignore_errors=True)
        version = cache / time.strftime("v-%Y%m%d-%H%M%S")
        while version.exists():
            version = version.with_name(version.name + "x")
        meta = {
            "trainbook": str(ROOT.resolve()),
            "dep_line": DEP_LINE,
            "built": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "build_seconds": round(seconds, 1),
            "dep_seconds": round(times[1], 1),
            "started_from": previous.resolve().name if previous.exists() else None,
        }
        (slot / "kernel-cache.json").write_text(json.dumps(meta, indent=1) + "\n")
        subprocess.run(["chmod", "-R", "go+rX", str(slot)], check=True)
        slot.rename(version)
        shutil.rmtree(scratch, ignore_errors=True)
        link = cache / ".current.new"
        link.unlink(missing_ok=True)
        link.symlink_to(version.name)
        os.replace(link, previous)  # atomic: a kernel sees the old version or the new one
        # Keep the version before this one (a kernel may still be copying it); drop older ones.
        versions = sorted(p for p in cache.glob("v-*") if p.is_dir())
        for old in versions[:-2]:
            shutil.rmtree(old, ignore_errors=True)
        size = disk_bytes(version)
        print(f"kernel cache: {version} is current ({size / 2**20:.0f} MiB; `:dep trainbook` took "
              f"{times[1]:.0f} s, {'from ' + meta['started_from'] if meta['started_from'] else 'cold'})", flush=True)
        return version


def measure(cache, json_path, trainbook=None, students=1):
    """A new user's first `:dep` + cell (a fresh slot root seeded from `cache`), then a warm kernel
    start + `:dep` + cell in the same slot. With `trainbook` (another checkout), the `:dep` line
    names it: the cache then serves the dependencies but not trainbook itself. With `students` >
    1, that many new users (each a fresh slot root, as a fresh home has) open a notebook at the
    same moment first, as a class does; their first cells' times are recorded too. Writes and
    returns the figures."""
    current = (cache / "current").resolve()
    if not current.exists():
        raise SystemExit(f"no kernel cache at {cache}: run `scripts/kernel/kernel_cache.py build` first")
    meta = json.loads((current / "kernel-cache.json").read_text())
    dep = DEP_LINE if trainbook is None else DEP_LINE.replace(str(ROOT.resolve()), str(trainbook.resolve()))
    together = None
    if students > 1:
        import concurrent.futures

        with contextlib.ExitStack() as stack:
            roots = [stack.enter_context(tempfile.TemporaryDirectory(prefix="kernel-time-")) for _ in range(students)]
            with concurrent.futures.ThreadPoolExecutor(students) as pool:
                runs = [pool.submit(run_cells, [dep, FIRST_CELL], kernel_env(pathlib.Path(r), cache)) for r in roots]
                together = [round(sum(run.result()), 1) for run in runs]
    with tempfile.TemporaryDirectory(prefix="kernel-time-") as root:
        env = kernel_env(pathlib.Path(root), cache)
        first = run_cells([dep, FIRST_CELL], env)
        warm = run_cells([dep, FIRST_CELL], env)
        slot_bytes = disk_bytes(pathlib.Path(root) / "slot-0")
    figures = {
        "cache": str(current),
        "dep_line": dep,
        "cache_bytes": disk_bytes(current),
        "slot_bytes": slot_bytes,
        "cold_dep_seconds": meta["dep_seconds"] if meta["started_from"] is None else None,
        "first_cell_seconds": round(sum(first), 1),
        "first_parts_seconds": {"kernel_start": round(first[0], 1), "dep": round(first[1], 1), "cell": round(first[2], 1)},
        "warm_cell_seconds": round(sum(warm), 1),
        "warm_parts_seconds": {"kernel_start": round(warm[0], 1), "dep": round(warm[1], 1), "cell": round(warm[2], 1)},
        "students_at_once": students,
        "students_first_cell_seconds": together,
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d"),
    }
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(figures, indent=1) + "\n")
    print(json.dumps(figures, indent=1))
    return figures


def check(cache, kernels=2):
    """Starts `kernels` kernels at once, each in its own new slot: every one must be seeded with
    the cache's current version and run its first cell without compiling any dependency again.
    Brings the cache up to date first (`build`: nothing to do when cargo finds it current).
    Returns a failure message or None."""
    import concurrent.futures

    build(cache)
    current = (cache / "current").resolve()
    expected = compiled_dependencies(current)
    with tempfile.TemporaryDirectory(prefix="kernel-check-") as root:
        env = kernel_env(pathlib.Path(root), cache)
        with concurrent.futures.ThreadPoolExecutor(kernels) as pool:
            runs = [pool.submit(run_cells, [DEP_LINE, FIRST_CELL], env) for _ in range(kernels)]
            times = [sum(run.result()) for run in runs]
        for n in range(kernels):
            slot = pathlib.Path(root) / f"slot-{n}"
            seeded = (slot / ".seeded-from").read_text().strip() if (slot / ".seeded-from").exists() else None
            if seeded != str(current):
                return f"{slot} was not seeded from {current} (.seeded-from: {seeded})"
            found = compiled_dependencies(slot)
            if found != expected:
                changed = sorted(name for name, _, _ in found ^ expected)[:10]
                return f"{slot}: cargo compiled dependencies again: {changed}"
    print(f"kernel cache check: ok ({kernels} kernels at once, each seeded from {current.name}, "
          f"nothing recompiled; first cells {', '.join(f'{t:.0f} s' for t in times)})", flush=True)
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["build", "time", "check", "dep-line"])
    parser.add_argument("--cache", type=pathlib.Path, default=None, help="the cache directory")
    parser.add_argument("--trainbook", type=pathlib.Path, default=None,
                        help="time: a `:dep` on this trainbook checkout instead of the cache's")
    parser.add_argument("--json", type=pathlib.Path, default=ROOT / "target" / "bench" / "notebook_kernel.json")
    parser.add_argument("--students", type=int, default=1,
                        help="time: first that many new users opening a notebook at once (a class)")
    args = parser.parse_args()
    if args.command == "dep-line":  # what a build here would put in the cache (and workspaces copy)
        print(DEP_LINE)
        return 0
    cache = (args.cache or default_cache()).absolute()
    named = kernelspec_cache()
    if named and named.absolute() != cache:
        raise SystemExit(f"the trainbook kernelspec names the kernel cache {named}, not {cache}: its kernels "
                         f"would not use {cache} (rerun `TRAINBOOK_KERNEL_CACHE={cache} scripts/setup/setup.sh --notebook`)")
    if args.command == "build":
        build(cache)
    elif args.command == "check":
        failure = check(cache)
        if failure:
            print(f"kernel cache check: FAILED: {failure}", flush=True)
            return 1
    else:
        measure(cache, args.json, args.trainbook, args.students)
    return 0


if __name__ == "__main__":
    sys.exit(main())
