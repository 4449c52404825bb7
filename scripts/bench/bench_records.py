#!/usr/bin/env python3
"""BENCHMARKS.md, generated from the benches' records.

A record is one bench's latest measurement on one kind of machine:
benches/results/BENCH/KIND.json, with the date, the commit, the machine, the torch version, the
command and one or more runs of rows (trainbook's figure, the reference's, their ratio).

    python3 scripts/bench/bench_records.py record BENCH [--json PATH ...] [--note TEXT]
        After `cargo bench --bench BENCH` (or the GPU bundle's bench: --json REPORT/gpu.json):
        turns the bench's own JSON (target/bench/BENCH.json by default; one --json per run)
        into the record of this machine's kind, replacing the one before, and writes
        BENCHMARKS.md again. --results DIR and --out FILE write elsewhere (the GPU bundle's
        run.sh writes REPORT_DIR/records/gpu/KIND.json, --commit naming the bundle's commit).
    python3 scripts/bench/bench_records.py render [--check]
        Writes BENCHMARKS.md from the records; --check only compares (exit 1 when it differs):
        tests/tooling/benchmarks_md.rs runs it in `make test`.

Only Python's standard library is used, so any python3 runs it.
"""
import argparse
import datetime
import glob
import json
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RESULTS = os.path.join(ROOT, "benches", "results")
BENCHMARKS_MD = os.path.join(ROOT, "BENCHMARKS.md")
# The order of the benches within a machine's section.
BENCHES = ["gpu", "train_step", "autocast_step", "ddp", "checkpoint", "loader"]
REFERENCE = {"loader": "torchvision"}


def speed(what, ours, theirs, unit="img/s"):
    """A row where more is better (img/s): ratio = trainbook / reference."""
    return {"what": what, "trainbook": ours, "reference": theirs, "unit": unit,
            "ratio": ours / theirs if theirs else None}


def duration(what, ours, theirs, unit, ratio):
    """A row of times; `ratio` as the bench states it (its name says which way)."""
    return {"what": what, "trainbook": ours, "reference": theirs, "unit": unit, "ratio": ratio}


def rows_train_step(j):
    rows = [speed(what, j[key]["trainbook_img_per_s"], j[key]["pytorch_img_per_s"])
            for key, what in [("resnet34", "ResNet34 train step, batch 16, 224 px, float32"),
                              ("resnet34_bf16", "the same, bf16 autocast"),
                              ("resnet34_loader", "the same in float32 through `train_epoch` with a loader")]]
    for key, what in [("mnist_epoch", "one MNIST epoch (batch 64): time, PyTorch's / trainbook's"),
                      ("mnist_epoch_step_records", "the same with per-step records")]:
        rows.append(duration(what, j[key]["trainbook_s"], j[key]["pytorch_s"], "s", j[key]["speed_ratio"]))
    return rows


def rows_autocast_step(j):
    return [duration(f"{phase} ({j.get('precision', '?')}): time, PyTorch's / trainbook's",
                     v["trainbook_s"], v["pytorch_s"], "s", v["speed_ratio"])
            for phase, v in j.items() if isinstance(v, dict)]


def rows_ddp(j):
    rows = [speed(what, j[key]["trainbook"], j[key]["pytorch"])
            for key, what in [("world2", "2 ranks x 1 thread"),
                              ("world2_accumulate2", "2 ranks x 1 thread, accumulation 2"),
                              ("world1", "1 rank x 2 threads")]]
    x = j["exchange_overhead"]
    rows.append({"what": "what the exchange adds to a step after overlap",
                 "text": f"{100 * x['trainbook']:.1f}% vs {100 * x['pytorch']:.1f}%"})
    return rows


def rows_checkpoint(j):
    s, l, b = j["save"], j["load"], j["background_save"]
    return [
        duration("save (atomic, fsync, CRC32) vs torch.save + os.sync: time, trainbook's / PyTorch's",
                 1e3 * s["trainbook_s"], 1e3 * s["torch_s"], "ms", s["time_ratio"]),
        {"what": "background save: how long the step waits, and its share of torch.save + os.sync",
         "text": f"{1e3 * b['stall_s']:.0f} ms ({b['stall_vs_torch_save']:.2f}x); the write done after {1e3 * b['write_s']:.0f} ms"},
        duration("load (CRC32-checked, into model and optimizer) vs torch.load: time, trainbook's / PyTorch's",
                 1e3 * l["trainbook_s"], 1e3 * l["torch_s"], "ms", l["time_ratio"]),
    ]


LOADER_PIPELINES = {"train": "train (AutoAugment)", "ra": "RandAugment",
                    "ta_wide_erase": "TrivialAugmentWide + RandomErasing(0.25)", "augmix": "AugMix"}


def rows_loader(j):
    rows = []
    for key, v in j.items():
        pipeline, _, workers = key.rpartition("/")
        name = LOADER_PIPELINES.get(pipeline, pipeline)
        workers = workers.removeprefix("workers=")
        rows.append(speed(f"{name}, {workers} workers", v["trainbook"], v["torchvision"]))
    return rows


def rows_gpu(j):
    if "skipped" in j:
        raise SystemExit(f"bench_records: the GPU bench was skipped ({j['skipped']}): nothing to record")
    img = lambda v: v.get("img_per_s") if isinstance(v, dict) else None
    rows = []
    for r in j["resnet34_step"]:
        name = f"batch {r['batch']}, {r['precision']}"
        rows.append(speed(f"{name}, eager", img(r["trainbook"]), img(r["pytorch"])))
        if img(r["trainbook_graphed"]):
            rows.append(speed(f"{name}, trainbook graphed vs PyTorch eager",
                              img(r["trainbook_graphed"]), img(r["pytorch"])))
        ours = max((img(r[k]) or 0.0 for k in ("trainbook_graphed", "trainbook_graphed_cudnn_benchmark")),
                   default=0.0)
        theirs = max(((img(r[k]) or 0.0, label) for k, label in PYTORCH_MODES), default=(0.0, ""))
        if ours and theirs[0]:
            rows.append(speed(f"{name}, best vs best (PyTorch's: {theirs[1]})", ours, theirs[0]))
    for r in j["designsafe_epoch"]:
        rows.append(speed(f"DesignSafe epoch (eager), {r['workers']} loader workers",
                          img(r["trainbook"]), img(r["pytorch"])))
        if img(r.get("trainbook_graphed")):
            rows.append(speed(f"DesignSafe epoch, the step as a CUDA graph, {r['workers']} loader workers",
                              img(r["trainbook_graphed"]), img(r["pytorch"])))
    for r in j["loader"]:
        rows.append(speed(f"JPEG loader alone, {r['workers']} workers, vs torchvision",
                          img(r["trainbook"]), img(r["pytorch"])))
    return rows


# PyTorch's ways of running the step in the GPU bench, and their names.
PYTORCH_MODES = [("pytorch", "eager"), ("pytorch_cudnn_benchmark", "cudnn.benchmark"),
                 ("pytorch_cuda_graph", "torch.cuda.graph"),
                 ("pytorch_compile_reduce_overhead", 'torch.compile(mode="reduce-overhead")')]


CONVERTERS = {"train_step": rows_train_step, "autocast_step": rows_autocast_step, "ddp": rows_ddp,
              "checkpoint": rows_checkpoint, "loader": rows_loader, "gpu": rows_gpu}


def cpu_machine():
    """This machine's kind: cores, CPU model and the vector units the figures depend on."""
    with open("/proc/cpuinfo") as f:
        text = f.read()
    model = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    flags = set((re.search(r"^flags\s*:\s*(.+)$", text, re.M) or [None, ""])[1].split())
    vector = ("AVX-512 with avx512_bf16" if "avx512_bf16" in flags else
              "AVX-512, no avx512_bf16" if "avx512f" in flags else "no AVX-512")
    cores = os.cpu_count()
    return {"kind": f"{cores}-core {model.group(1).strip() if model else 'CPU'}, {vector}",
            "cores": cores, "gpu": None}


def torch_version():
    """The version of the venv's torch, from its package metadata (importing torch takes seconds)."""
    for site in glob.glob(os.path.join(ROOT, ".venv", "lib", "python*", "site-packages")):
        for info in glob.glob(os.path.join(site, "torch-*.dist-info")):
            return os.path.basename(info)[len("torch-"):-len(".dist-info")]
    return "unknown"


def commit():
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return head + (" with uncommitted changes" if dirty else "")


def slug(kind):
    return re.sub(r"[^a-z0-9]+", "-", kind.lower()).strip("-")


def record(bench, paths, note, results=RESULTS, measured=None):
    if bench not in CONVERTERS:
        raise SystemExit(f"bench_records: unknown bench {bench!r} (known: {', '.join(BENCHES)})")
    paths = paths or [os.path.join(ROOT, "target", "bench", f"{bench}.json")]
    runs = []
    for path in paths:
        try:
            with open(path) as f:
                runs.append(CONVERTERS[bench](json.load(f)))
        except FileNotFoundError:
            raise SystemExit(f"bench_records: {path} not found: run `cargo bench --bench {bench}` first")
        except (KeyError, TypeError, ValueError) as e:
            raise SystemExit(f"bench_records: {path} is not a {bench} bench's JSON ({e!r})")
    if bench == "gpu":
        with open(paths[0]) as f:
            info = json.load(f)["machine"]
        machine = {"kind": info["gpu"], "cores": info.get("cpu_cores"), "gpu": info["gpu"],
                   "cuda": info.get("cuda"), "cudnn": info.get("cudnn")}
        torch = info["torch"]
        command = "the GPU bundle's bin/gpu-bench (make gpu-bundle; run.sh)"
    else:
        machine, torch, command = cpu_machine(), torch_version(), f"cargo bench --bench {bench}"
    rec = {"bench": bench, "machine": machine, "date": datetime.date.today().isoformat(),
           "commit": measured or commit(), "torch": torch, "command": command,
           "source": f"{len(runs)} run(s) of the bench's JSON, recorded by scripts/bench/bench_records.py",
           "runs": runs}
    if note:
        rec["note"] = note
    out = os.path.join(results, bench, slug(machine["kind"]) + ".json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(rec, f, indent=1)
        f.write("\n")
    print(f"wrote {os.path.relpath(out, ROOT)}")


def number(x, unit):
    if x is None:
        return "?"
    return f"{x:.0f}" if unit == "ms" or abs(x) >= 100 else f"{x:.2f}"


def cell(row):
    if "text" in row:
        return row["text"]
    ratio = f"{row['ratio']:.2f}x" if row.get("ratio") is not None else "no ratio"
    if row.get("trainbook") is None:
        return ratio
    unit = row["unit"]
    return f"{number(row['trainbook'], unit)} vs {number(row['reference'], unit)} {unit} ({ratio})"


def load_records(results):
    records = []
    for bench in sorted(os.listdir(results)) if os.path.isdir(results) else []:
        folder = os.path.join(results, bench)
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            if name.endswith(".json"):
                with open(os.path.join(folder, name)) as f:
                    rec = json.load(f)
                if rec.get("bench") != bench or bench not in BENCHES:
                    raise SystemExit(f"bench_records: {bench}/{name} holds bench {rec.get('bench')!r}")
                records.append(rec)
    return records


def render(results):
    records = load_records(results)
    out = ["# Benchmarks", "",
           "Generated from `benches/results/BENCH/KIND.json` by `scripts/bench/bench_records.py`: do",
           "not edit by hand. Each section is the latest run of a bench on one kind of machine, with",
           "trainbook and the reference (PyTorch, or torchvision for the loader) measured in the same",
           "run. After `cargo bench --bench NAME`, `python3 scripts/bench/bench_records.py record",
           "NAME` records it and writes this file again. What each bench measures:",
           "[Performance](docs/src/performance.md); the GPU runs in detail: [Speed on",
           "GPUs](docs/src/gpu-speed.md#measured-on-gpus). Earlier runs:",
           "[benches/results/HISTORY.md](benches/results/HISTORY.md).",
           ""]
    kinds = sorted({r["machine"]["kind"] for r in records},
                   key=lambda k: (not any(r["machine"].get("gpu") for r in records if r["machine"]["kind"] == k), k))
    for kind in kinds:
        out += [f"## {kind}", ""]
        mine = sorted((r for r in records if r["machine"]["kind"] == kind),
                      key=lambda r: BENCHES.index(r["bench"]))
        for rec in mine:
            runs = rec["runs"]
            count = {1: "one run", 2: "two runs", 3: "three runs"}.get(len(runs), f"{len(runs)} runs")
            ref = REFERENCE.get(rec["bench"], "PyTorch")
            out += [f"### `{rec['bench']}`: {rec['date']}, commit {rec['commit']}, {count}", ""]
            out += [f"torch {rec['torch']}; {rec['command']}; {rec['source']}.", ""]
            head = [f"run 1: trainbook vs {ref}"] + [f"run {i}" for i in range(2, len(runs) + 1)]
            if len(runs) == 1:
                head = [f"trainbook vs {ref}"]
            out.append("| what | " + " | ".join(head) + " |")
            out.append("| --- |" + " --- |" * len(head))
            for i, row in enumerate(runs[0]):
                cells = [cell(run[i]) if i < len(run) else "" for run in runs]
                out.append(f"| {row['what']} | " + " | ".join(cells) + " |")
            out.append("")
            if rec.get("note"):
                out += [rec["note"], ""]
    return "\n".join(out).rstrip("\n") + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record", help="record this machine's run of a bench")
    rec.add_argument("bench")
    rec.add_argument("--json", action="append", default=[], help="the bench's JSON, one per run")
    rec.add_argument("--note", default="")
    rec.add_argument("--results", default=RESULTS)
    rec.add_argument("--commit", help="the commit measured (default: this checkout's HEAD)")
    rec.add_argument("--out", default=BENCHMARKS_MD)
    ren = sub.add_parser("render", help="write BENCHMARKS.md from the records")
    ren.add_argument("--check", action="store_true", help="compare only; exit 1 when it differs")
    ren.add_argument("--results", default=RESULTS)
    ren.add_argument("--out", default=BENCHMARKS_MD)
    args = parser.parse_args(argv)
    if args.cmd == "record":
        record(args.bench, args.json, args.note, args.results, args.commit)
    text = render(args.results)
    if args.cmd == "render" and args.check:
        current = ""
        if os.path.exists(args.out):
            with open(args.out) as f:
                current = f.read()
        if current != text:
            print(f"{os.path.relpath(args.out, ROOT)} differs from the records: run "
                  "`python3 scripts/bench/bench_records.py render`", file=sys.stderr)
            return 1
        print(f"{os.path.relpath(args.out, ROOT)} matches the records")
        return 0
    with open(args.out, "w") as f:
        f.write(text)
    print(f"wrote {os.path.relpath(args.out, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
