"""Oracle for tests/training/param_groups.rs: torch.optim with three param groups (the venv's
torch, one thread).

  param_groups.py groups DIR
      A stand-in model of named float32 tensors drawn after torch.manual_seed(5):
      conv.weight [4,3,3,3], conv.bias [4], bn.weight [4], bn.bias [4], fc.weight [5,16],
      fc.bias [5]; and 6 steps of gradients for them. Groups, in this order:
        0 "default":  conv.weight                         (the optimizer's lr and weight decay)
        1 "fc.":      fc.weight, fc.bias                  lr x10
        2 "no_decay": conv.bias, bn.weight, bn.bias       weight_decay 0
      For SGD (lr 0.05, momentum 0.9, weight_decay 5e-4, foreach=True) and AdamW (lr 1e-3,
      weight_decay 0.05, fused=True): each step sets the gradients, steps the optimizer, then
      steps SequentialLR([LinearLR(start_factor=0.25, total_iters=2),
      CosineAnnealingLR(T_max=4, eta_min=1e-4)], milestones=[2]).
      DIR/groups.safetensors: init.NAME, grad.STEP.NAME, OPT.lrs ([7, 3] float64: every
      group's get_last_lr() after construction and after each step), OPT.final.NAME,
      OPT.momentum_buffer.NAME (SGD), OPT.exp_avg.NAME and OPT.exp_avg_sq.NAME (AdamW).
      And OPT "sgd_one_cycle" and "adamw_one_cycle": the same SGD and AdamW and groups under
      OneCycleLR(max_lr=[0.05, 0.5, 0.02], total_steps=6, pct_start=0.5, base_momentum=[0.85,
      0.8, 0.9], max_momentum=[0.95, 0.9, 0.99]) instead (one peak and one momentum range per
      group), with OPT.momenta ([7, 3] float64: every group's momentum, or beta1, at the same
      points).
"""
import sys

import torch
from safetensors.torch import save_file
from torch.optim import lr_scheduler as S

torch.set_num_threads(1)
cmd, d = sys.argv[1], sys.argv[2]
assert cmd == "groups", cmd

torch.manual_seed(5)
shapes = {"conv.weight": [4, 3, 3, 3], "conv.bias": [4], "bn.weight": [4], "bn.bias": [4],
          "fc.weight": [5, 16], "fc.bias": [5]}
init = {n: torch.randn(s) for n, s in shapes.items()}
grads = [{n: torch.randn(s) for n, s in shapes.items()} for _ in range(6)]
groups = [["conv.weight"], ["fc.weight", "fc.bias"], ["conv.bias", "bn.weight", "bn.bias"]]

out = {f"init.{n}": t for n, t in init.items()}
for k, g in enumerate(grads):
    out.update({f"grad.{k}.{n}": t for n, t in g.items()})

makers = {
    "sgd": (0.05, lambda gs: torch.optim.SGD(gs, lr=0.05, momentum=0.9, weight_decay=5e-4,
                                             foreach=True)),
    "adamw": (1e-3, lambda gs: torch.optim.AdamW(gs, lr=1e-3, weight_decay=0.05, fused=True)),
}
makers["sgd_one_cycle"] = makers["sgd"]
makers["adamw_one_cycle"] = makers["adamw"]
for name, (lr, make) in makers.items():
    params = {n: torch.nn.Parameter(t.clone()) for n, t in init.items()}
    opt = make([
        {"params": [params[n] for n in groups[0]]},
        {"params": [params[n] for n in groups[1]], "lr": lr * 10},
        {"params": [params[n] for n in groups[2]], "weight_decay": 0.0},
    ])
    one_cycle = name.endswith("_one_cycle")
    if one_cycle:
        sched = S.OneCycleLR(opt, max_lr=[0.05, 0.5, 0.02], total_steps=6, pct_start=0.5,
                             base_momentum=[0.85, 0.8, 0.9], max_momentum=[0.95, 0.9, 0.99])
    else:
        warmup = S.LinearLR(opt, start_factor=0.25, total_iters=2)
        cosine = S.CosineAnnealingLR(opt, T_max=4, eta_min=1e-4)
        sched = S.SequentialLR(opt, [warmup, cosine], milestones=[2])
    lrs = [sched.get_last_lr()]
    def momenta_now():
        return [g["betas"][0] if "betas" in g else g["momentum"] for g in opt.param_groups]

    momenta = [momenta_now()]
    for g in grads:
        for n, p in params.items():
            p.grad = g[n].clone()
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr())
        momenta.append(momenta_now())
    out[f"{name}.lrs"] = torch.tensor(lrs, dtype=torch.float64)
    if one_cycle:
        out[f"{name}.momenta"] = torch.tensor(momenta, dtype=torch.float64)
    for n, p in params.items():
        out[f"{name}.final.{n}"] = p.detach().clone()
        for key, t in opt.state[p].items():
            if key != "step":
                out[f"{name}.{key}.{n}"] = t.clone()

save_file({k: v.contiguous() for k, v in out.items()}, f"{d}/groups.safetensors")
