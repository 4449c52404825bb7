"""Summarises the Chrome traces trainbook's profiler writes (OUT/profile/*.pt.trace.json, the
format of torch.profiler's export_chrome_trace): for each recorded ProfilerStep#N of each file,
one line with the step's wall time, the time of each of trainbook's phases inside it, and, on
CUDA, the GPU kernels that ran in it (count, summed kernel time) and the host's launch calls
(cudaLaunchKernel and the like, cudaGraphLaunch). Stdlib only (the GPU bundle's machine has
no registry).

  trace_summary.py TRACE_OR_DIR... [--json OUT.json]
"""
import json
import os
import sys


def events(path):
    with open(path) as f:
        return [e for e in json.load(f).get("traceEvents", []) if e.get("ph") == "X"]


def summarise(path):
    evs = events(path)
    steps = sorted(
        (e for e in evs if e["name"].startswith("ProfilerStep#")), key=lambda e: e["ts"]
    )
    rows = []
    for s in steps:
        t0, t1 = s["ts"], s["ts"] + s["dur"]
        inside = [e for e in evs if t0 <= e["ts"] <= t1 and e is not s]
        phases = {}
        for e in inside:
            if e["name"].startswith("trainbook::"):
                key = e["name"].split("::", 1)[1]
                phases[key] = phases.get(key, 0.0) + e["dur"] / 1000.0
        kernels = [e for e in inside if e.get("cat") == "kernel"]
        launches = [e for e in inside if e.get("cat") == "cuda_runtime" and "Launch" in e["name"]]
        graph_launches = [e for e in launches if e["name"].startswith("cudaGraphLaunch")]
        rows.append({
            "file": os.path.basename(path),
            "step": s["name"],
            "wall_ms": round(s["dur"] / 1000.0, 3),
            "phases_ms": {k: round(v, 3) for k, v in sorted(phases.items())},
            "kernels": len(kernels),
            "kernel_ms": round(sum(e["dur"] for e in kernels) / 1000.0, 3),
            "launch_calls": len(launches) - len(graph_launches),
            "graph_launches": len(graph_launches),
        })
    return rows


def main(argv):
    out_json = None
    if "--json" in argv:
        i = argv.index("--json")
        out_json = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    paths = []
    for a in argv:
        if os.path.isdir(a):
            paths += sorted(
                os.path.join(a, f) for f in os.listdir(a) if f.endswith(".pt.trace.json")
            )
        else:
            paths.append(a)
    if not paths:
        print("trace_summary: no trace given or found", file=sys.stderr)
        return 1
    rows = [r for p in paths for r in summarise(p)]
    for r in rows:
        phases = ", ".join(f"{k} {v:.2f}" for k, v in r["phases_ms"].items())
        print(
            f'{r["file"]} {r["step"]}: {r["wall_ms"]:.2f} ms wall ({phases}); '
            f'{r["kernels"]} GPU kernels, {r["kernel_ms"]:.2f} ms; '
            f'{r["launch_calls"]} kernel launch calls, {r["graph_launches"]} graph launches'
        )
    if out_json:
        with open(out_json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
