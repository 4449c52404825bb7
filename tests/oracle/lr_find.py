"""Oracle for tests/training/lr_find.rs: fastai's own range-test definitions on trainbook's curve.

  lr_find.py check CURVE.json FASTAI_WHEEL OUT.json
      CURVE.json holds trainbook's range test (start_lr, end_lr, num_it, lrs, raw_losses,
      losses). From fastai's wheel (fastai/callback/schedule.py, read without importing fastai,
      whose imports need packages the venv does not have) the functions `sched_exp` and
      `valley` are compiled on their own and run: the rates fastai's SchedExp gives step t
      (t / num_it of the way), and fastai's valley pick over the points lr_find looks at
      (num_it // 10 to the fifth from the end, as float32 tensors). The smoothing is fastai's
      AvgSmoothLoss (fastai/learner.py: a torch.lerp towards the running value with beta 0.98,
      divided by 1 - beta ** count), recomputed here on trainbook's raw losses. Writes OUT.json.
"""
import ast
import json
import sys
import zipfile

import torch


def fastai_functions(wheel, names):
    source = zipfile.ZipFile(wheel).read("fastai/callback/schedule.py").decode()
    tree = ast.parse(source)
    found = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in names:
            node.decorator_list = []  # sched_exp is wrapped by @annealer; the plain function
            node.returns = None
            module = ast.Module(body=[node], type_ignores=[])
            scope = {}
            exec(compile(module, wheel, "exec"), scope)
            found[node.name] = scope[node.name]
    missing = set(names) - set(found)
    if missing:
        raise SystemExit(f"fastai's schedule.py has no {missing}")
    return found


def smooth(raw, beta=0.98):
    val, out = torch.tensor(0.0), []
    for count, loss in enumerate(raw, start=1):
        val = torch.lerp(torch.tensor(loss, dtype=torch.float32), val, beta)
        out.append(float(val / (1 - beta**count)))
    return out


def check(curve_file, wheel, out):
    curve = json.load(open(curve_file))
    f = fastai_functions(wheel, {"sched_exp", "valley"})
    num_it = curve["num_it"]
    lrs = [f["sched_exp"](curve["start_lr"], curve["end_lr"], t / num_it) for t in range(len(curve["lrs"]))]
    smoothed = smooth(curve["raw_losses"])
    losses = torch.tensor(curve["losses"], dtype=torch.float32)[num_it // 10 : -5]
    nan = torch.nonzero(torch.isnan(losses.view(-1)))
    if len(nan) > 0:
        losses = losses[: int(min(nan))]
    # valley indexes the rates it is given: handing it the indices returns the index it picks.
    pick = None
    if len(losses) > 0:
        pick, _ = f["valley"](torch.arange(len(losses)), losses, num_it)
        pick = int(pick) + num_it // 10
    result = {
        "lrs": lrs,
        "lrs_equal": lrs == curve["lrs"],
        "smoothed": smoothed,
        "smoothed_equal": smoothed == curve["losses"],
        "valley_index": pick,
    }
    json.dump(result, open(out, "w"))


if __name__ == "__main__":
    {"check": check}[sys.argv[1]](*sys.argv[2:])
