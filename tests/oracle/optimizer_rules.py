"""Oracle for tests/parity/optimizer_rules.rs: torch.optim's RMSprop, NAdam, RAdam, Adagrad,
Adadelta and Adamax.

  optimizer_rules.py rules OUT
      A two-layer MLP (Linear 6->5, Tanh, Linear 5->3) drawn after torch.manual_seed(3), 16
      seeded samples of 6 features and 3 classes, on one thread. For each setting below, 10
      steps from the same initial weights of zero_grad, cross-entropy, backward and step, with
      torch's single-tensor loop (foreach=False). Writes OUT/rules.safetensors: `init.*`, `x`,
      `y`, and per setting `<name>.<param>` (the weights after 10 steps), `<name>.state.<param>.
      <key>` (the optimizer's state tensors) and `<name>.losses`. The `*_one_cycle` settings
      step a OneCycleLR(max_lr=0.05, total_steps=10) after every step, its momentum cycling
      (torch's default): RMSprop's momentum, NAdam's and RAdam's beta1, and SGD's momentum and
      Adam's beta1 with the kernels trainbook uses by default (foreach SGD, fused Adam).
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import save_file

torch.set_num_threads(1)

SETTINGS = {
    "rmsprop": lambda p: torch.optim.RMSprop(p, lr=0.01, foreach=False),
    "rmsprop_full": lambda p: torch.optim.RMSprop(
        p, lr=0.01, alpha=0.9, eps=0.0316, weight_decay=1e-4, momentum=0.9, centered=True,
        foreach=False),
    "nadam": lambda p: torch.optim.NAdam(p, lr=2e-3, foreach=False),
    "nadam_l2": lambda p: torch.optim.NAdam(p, lr=2e-3, weight_decay=0.01, foreach=False),
    "nadamw": lambda p: torch.optim.NAdam(
        p, lr=2e-3, weight_decay=0.01, decoupled_weight_decay=True, foreach=False),
    "radam": lambda p: torch.optim.RAdam(p, lr=1e-3, foreach=False),
    "radam_l2": lambda p: torch.optim.RAdam(p, lr=1e-3, weight_decay=0.01, foreach=False),
    "radamw": lambda p: torch.optim.RAdam(
        p, lr=1e-3, weight_decay=0.01, decoupled_weight_decay=True, foreach=False),
    "adagrad": lambda p: torch.optim.Adagrad(p, lr=0.05, foreach=False),
    "adagrad_full": lambda p: torch.optim.Adagrad(
        p, lr=0.05, lr_decay=0.01, weight_decay=1e-3, initial_accumulator_value=0.1, eps=1e-6,
        foreach=False),
    "adadelta": lambda p: torch.optim.Adadelta(p, foreach=False),
    "adadelta_full": lambda p: torch.optim.Adadelta(
        p, lr=0.5, rho=0.8, eps=1e-5, weight_decay=1e-3, foreach=False),
    "adamax": lambda p: torch.optim.Adamax(p, foreach=False),
    "adamax_full": lambda p: torch.optim.Adamax(
        p, lr=5e-3, betas=(0.8, 0.99), eps=1e-6, weight_decay=1e-3, foreach=False),
    "adamax_one_cycle": lambda p: torch.optim.Adamax(p, foreach=False),
    "rmsprop_one_cycle": lambda p: torch.optim.RMSprop(p, lr=0.01, foreach=False),
    "nadam_one_cycle": lambda p: torch.optim.NAdam(p, lr=2e-3, foreach=False),
    "radam_one_cycle": lambda p: torch.optim.RAdam(p, lr=1e-3, foreach=False),
    "sgd_one_cycle": lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9, foreach=True),
    "adam_one_cycle": lambda p: torch.optim.Adam(p, lr=1e-3, fused=True),
}


def model():
    return nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 3))


def main(out):
    torch.manual_seed(3)
    net = model()
    init = {k: v.clone() for k, v in net.state_dict().items()}
    x, y = torch.randn(16, 6), torch.randint(0, 3, (16,))
    tensors = {f"init.{k}": v for k, v in init.items()}
    tensors["x"], tensors["y"] = x, y
    settings = dict(SETTINGS)
    # Two param groups: the first layer with its own rate and weight decay.
    settings["rmsprop_groups"] = lambda p: torch.optim.RMSprop(
        [{"params": p[:2], "lr": 0.02, "weight_decay": 1e-3}, {"params": p[2:]}], lr=0.01,
        foreach=False)
    for name, make in settings.items():
        net = model()
        net.load_state_dict(init)
        opt = make(list(net.parameters()))
        cycle = None
        if name.endswith("_one_cycle"):
            cycle = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05, total_steps=10)
        losses = []
        for _ in range(10):
            opt.zero_grad()
            loss = F.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            if cycle is not None:
                cycle.step()
            losses.append(loss.item())
        names = dict(zip([id(p) for p in net.parameters()], [n for n, _ in net.named_parameters()]))
        for pname, p in net.named_parameters():
            tensors[f"{name}.{pname}"] = p.detach().clone()
        for p, st in opt.state.items():
            for key, value in st.items():
                if key != "step":
                    tensors[f"{name}.state.{names[id(p)]}.{key}"] = value.clone()
        tensors[f"{name}.losses"] = torch.tensor(losses, dtype=torch.float64)
    save_file({k: v.contiguous() for k, v in tensors.items()}, f"{out}/rules.safetensors")


if __name__ == "__main__":
    assert sys.argv[1] == "rules", sys.argv
    main(sys.argv[2])
