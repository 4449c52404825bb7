"""torch's learning rates for tests/training/schedules.rs: reads a JSON list of schedule
configurations on stdin and prints, for each, get_last_lr()[0] after construction and after every
step (optimizer.step() then scheduler.step(), the usual order; ReduceLROnPlateau is stepped with
the configuration's metrics; SequentialLR and ChainedScheduler are built from their parts'
configurations). A configuration with "record": "momentum" gives the first param group's
momentum instead (SGD's "momentum", or betas[0] with "optimizer": "adam"), which OneCycleLR's
cycle_momentum writes there."""
import json
import sys
import warnings

import torch
from torch.optim import lr_scheduler as S
from torch.optim.swa_utils import SWALR

warnings.simplefilter("ignore")


def make(c, opt):
    kind = c["kind"]
    if kind == "StepLR":
        return S.StepLR(opt, step_size=c["step_size"], gamma=c["gamma"])
    if kind == "CosineAnnealingLR":
        return S.CosineAnnealingLR(opt, T_max=c["t_max"], eta_min=c["eta_min"])
    if kind == "LinearLR":
        return S.LinearLR(opt, start_factor=c["start_factor"], end_factor=c["end_factor"],
                          total_iters=c["total_iters"])
    if kind == "ConstantLR":
        return S.ConstantLR(opt, factor=c["factor"], total_iters=c["total_iters"])
    if kind == "OneCycleLR":
        # torch's two ways to give the length: total_steps, or epochs and steps_per_epoch.
        length = ({"total_steps": c["total_steps"]} if "total_steps" in c else
                  {"epochs": c["epochs"], "steps_per_epoch": c["steps_per_epoch"]})
        return S.OneCycleLR(opt, max_lr=c["max_lr"], **length,
                            pct_start=c["pct_start"], anneal_strategy=c["anneal"],
                            div_factor=c["div_factor"], final_div_factor=c["final_div_factor"],
                            three_phase=c["three_phase"],
                            cycle_momentum=c.get("cycle_momentum", False),
                            base_momentum=c.get("base_momentum", 0.85),
                            max_momentum=c.get("max_momentum", 0.95))
    if kind == "CyclicLR":
        return S.CyclicLR(opt, base_lr=c["base_lr"], max_lr=c["max_lr"], step_size_up=c["up"],
                          step_size_down=c.get("down"), mode=c["mode"], gamma=c.get("gamma", 1.0),
                          cycle_momentum=c.get("cycle_momentum", False),
                          base_momentum=c.get("base_momentum", 0.8),
                          max_momentum=c.get("max_momentum", 0.9))
    if kind == "ReduceLROnPlateau":
        return S.ReduceLROnPlateau(opt, mode=c["mode"], factor=c["factor"], patience=c["patience"],
                                   threshold=c["threshold"], threshold_mode=c["threshold_mode"],
                                   cooldown=c["cooldown"], min_lr=c["min_lr"])
    if kind == "MultiStepLR":
        return S.MultiStepLR(opt, milestones=c["milestones"], gamma=c["gamma"])
    if kind == "ExponentialLR":
        return S.ExponentialLR(opt, gamma=c["gamma"])
    if kind == "PolynomialLR":
        return S.PolynomialLR(opt, total_iters=c["total_iters"], power=c["power"])
    if kind == "CosineAnnealingWarmRestarts":
        return S.CosineAnnealingWarmRestarts(opt, T_0=c["t_0"], T_mult=c["t_mult"],
                                             eta_min=c["eta_min"])
    if kind == "SWALR":
        return SWALR(opt, swa_lr=c["swa_lr"], anneal_epochs=c["anneal_epochs"],
                     anneal_strategy=c["anneal"])
    if kind in ("LambdaLR", "MultiplicativeLR"):
        return getattr(S, kind)(opt, lr_lambda=function(c["fn"]))
    # The composites: their parts are built first on the same optimizer, as torch's users do.
    if kind == "SequentialLR":
        return S.SequentialLR(opt, [make(p, opt) for p in c["schedules"]], milestones=c["milestones"])
    if kind == "ChainedScheduler":
        return S.ChainedScheduler([make(p, opt) for p in c["schedules"]])
    raise ValueError(kind)


def function(spec):
    """The step functions the Rust test builds the same way."""
    name, a = spec
    if name == "pow":
        return lambda e: a ** e
    if name == "warm":
        return lambda e: min(1.0, (e + 1) / a)
    raise ValueError(name)


def sequence(c):
    p = torch.nn.Parameter(torch.zeros(1))
    if c.get("optimizer") == "adam":
        opt = torch.optim.Adam([p], lr=c["lr"])
    else:
        opt = torch.optim.SGD([p], lr=c["lr"], momentum=0.9)
    kind = c["kind"]
    s = make(c, opt)

    def value():
        if c.get("record") != "momentum":
            return s.get_last_lr()[0]
        group = opt.param_groups[0]
        return group["betas"][0] if "betas" in group else group["momentum"]

    lrs = [value()]
    for k in range(c["steps"]):
        opt.step()
        if kind == "ReduceLROnPlateau":
            s.step(c["metrics"][k])
        else:
            s.step()
        lrs.append(value())
    return lrs


print(json.dumps([sequence(c) for c in json.load(sys.stdin)]))
