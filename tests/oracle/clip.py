"""Oracle for tests/training/grad_clip.rs: gradient clipping in PyTorch itself (the venv's torch,
one thread).

  clip.py grads DIR   the MNIST CNN (tests/oracle/models.py's Net, seed 11, eval-mode forward)
                      on 16 samples, one backward of the cross-entropy: the raw gradients, then
                      for each case the total norm clip_grad_norm_ returns and the gradients it
                      leaves (clip_grad_value_: the gradients only):
                        norm2       clip_grad_norm_(params, 0.05)
                        norm2_idle  clip_grad_norm_(params, 1000.0)   (coefficient clamped to 1)
                        norm1       clip_grad_norm_(params, 0.5, norm_type=1)
                        norminf     clip_grad_norm_(params, 0.01, norm_type=inf)
                        value       clip_grad_value_(params, 0.001)
                      DIR/grads.safetensors: raw.NAME, CASE.norm, CASE.grad.NAME
  clip.py scaler DIR  float32 training of the same CNN with torch.amp.GradScaler("cpu",
                      init_scale=1024, growth_interval=3) and clipping, 6 steps, an inf written
                      into fc2.bias's gradient at step 2: scaler.scale(loss).backward();
                      scaler.unscale_(opt); clip_grad_norm_(params, 0.05); scaler.step(opt);
                      scaler.update(); for SGD (momentum 0.9, per-tensor) and Adam (fused):
                      DIR/scaler.safetensors: init.*, x, y, OPT.norms, OPT.scales,
                      OPT.changed, OPT.final.*
"""
import math
import sys

import torch
from safetensors.torch import save_file

torch.set_num_threads(1)
import models  # tests/oracle/models.py, beside this script

cmd, d = sys.argv[1], sys.argv[2]
loss_fn = torch.nn.CrossEntropyLoss()
torch.manual_seed(11)
net = models.Net()
init = {k: v.clone() for k, v in net.state_dict().items()}
x, y = torch.rand(16, 1, 28, 28), torch.randint(0, 10, (16,))
net.eval()

if cmd == "grads":
    loss_fn(net(x), y).backward()
    raw = {n: p.grad.clone() for n, p in net.named_parameters()}
    out = {f"raw.{n}": g for n, g in raw.items()}
    cases = {
        "norm2": lambda ps: torch.nn.utils.clip_grad_norm_(ps, 0.05),
        "norm2_idle": lambda ps: torch.nn.utils.clip_grad_norm_(ps, 1000.0),
        "norm1": lambda ps: torch.nn.utils.clip_grad_norm_(ps, 0.5, norm_type=1),
        "norminf": lambda ps: torch.nn.utils.clip_grad_norm_(ps, 0.01, norm_type=math.inf),
        "value": lambda ps: torch.nn.utils.clip_grad_value_(ps, 0.001),
    }
    for case, clip in cases.items():
        for n, p in net.named_parameters():
            p.grad = raw[n].clone()
        norm = clip(net.parameters())
        if norm is not None:
            out[f"{case}.norm"] = norm.reshape(1)
        out.update({f"{case}.grad.{n}": p.grad.clone() for n, p in net.named_parameters()})
    save_file({k: v.contiguous() for k, v in out.items()}, f"{d}/grads.safetensors")
elif cmd == "scaler":
    out = {f"init.{k}": v for k, v in init.items()}
    out["x"], out["y"] = x, y
    makers = {
        "sgd": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, foreach=False),
        "adam": lambda p: torch.optim.Adam(p, lr=1e-3, foreach=False, fused=True),
    }
    for name, make in makers.items():
        net.load_state_dict(init)
        opt = make(net.parameters())
        scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=3)
        norms, scales, changed = [], [], []
        for step in range(6):
            before = net.fc2.weight.detach().clone()
            opt.zero_grad()
            scaler.scale(loss_fn(net(x), y)).backward()
            if step == 2:
                net.fc2.bias.grad[0] = float("inf")
            scaler.unscale_(opt)
            norms.append(torch.nn.utils.clip_grad_norm_(net.parameters(), 0.05).item())
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
            changed.append(float(not torch.equal(before, net.fc2.weight)))
        out[f"{name}.norms"] = torch.tensor(norms, dtype=torch.float64)
        out[f"{name}.scales"] = torch.tensor(scales, dtype=torch.float64)
        out[f"{name}.changed"] = torch.tensor(changed, dtype=torch.float64)
        out.update({f"{name}.final.{k}": v.clone() for k, v in net.state_dict().items()})
    save_file({k: v.contiguous() for k, v in out.items()}, f"{d}/scaler.safetensors")
else:
    sys.exit(f"unknown command {cmd}")
