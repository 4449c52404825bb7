"""Oracle for tests/training/amp.rs: mixed precision in PyTorch itself (the venv's torch), one
thread.

  amp.py bf16 DIR [DEVICE] [DTYPE] [deterministic]
                      (DEVICE cpu or cuda, default cpu; DTYPE bfloat16 or float32, default bfloat16;
                      deterministic: torch.use_deterministic_algorithms(True) with cuDNN
                      deterministic and not benchmarking, as the GPU suite's Rust side)
                      The MNIST CNN (eval-mode forward, as tests/oracle/models.py's Net) and the
                      course ResNet34 (train mode, 32x32 inputs) trained 3 SGD(momentum) steps each
                      with the forward pass and the loss under torch.autocast("cpu", bfloat16):
                      DIR/bf16.safetensors (init.*, x/y per model, per-step losses, final state)
  amp.py scaler DIR   torch.amp.GradScaler("cpu", init_scale=1024, growth_interval=3) over 8 float32
                      steps of the MNIST CNN, with an inf written into one gradient at steps 2 and 5,
                      for SGD (single-tensor) and Adam (fused): the scale after every update, which
                      steps changed the weights, and the final weights: DIR/scaler.safetensors
"""
import sys

import torch
from safetensors.torch import save_file

torch.set_num_threads(1)
import models  # tests/oracle/models.py, beside this script

cmd, d = sys.argv[1], sys.argv[2]
device = sys.argv[3] if len(sys.argv) > 3 else "cpu"
dtype = getattr(torch, sys.argv[4]) if len(sys.argv) > 4 else torch.bfloat16
loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
if "deterministic" in sys.argv[5:]:
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False

if cmd == "bf16":
    out = {}
    torch.manual_seed(7)
    cases = [("mnist", models.Net(), torch.rand(8, 1, 28, 28), 10, False), ("resnet", models.course_resnet(), torch.rand(4, 3, 32, 32), 3, True)]
    for name, net, x, classes, train in cases:
        y = torch.randint(0, classes, (x.shape[0],))
        out.update({f"{name}.init.{k}": v.clone() for k, v in net.state_dict().items()})
        out[f"{name}.x"], out[f"{name}.y"] = x, y
        net, x, y = net.to(device), x.to(device), y.to(device)
        net.train(train)
        opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, foreach=True)
        losses = []
        for _ in range(3):
            opt.zero_grad()
            with torch.autocast(device, dtype=dtype, enabled=dtype != torch.float32):
                loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        out[f"{name}.losses"] = torch.tensor(losses, dtype=torch.float64)
        out.update({f"{name}.final.{k}": v.detach().cpu().clone() for k, v in net.state_dict().items()})
    save_file({k: v.contiguous() for k, v in out.items()}, f"{d}/bf16.safetensors")
elif cmd == "scaler":
    out = {}
    torch.manual_seed(11)
    net = models.Net()
    init = {k: v.clone() for k, v in net.state_dict().items()}
    out.update({f"init.{k}": v for k, v in init.items()})
    x, y = torch.rand(8, 1, 28, 28), torch.randint(0, 10, (8,))
    out["x"], out["y"] = x, y
    makers = {"sgd": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, foreach=False), "adam": lambda p: torch.optim.Adam(p, lr=1e-3, foreach=False, fused=True)}
    for name, make in makers.items():
        net.load_state_dict(init)
        opt = make(net.parameters())
        scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=3)
        scales, changed = [], []
        for step in range(8):
            before = net.fc2.weight.detach().clone()
            opt.zero_grad()
            scaler.scale(loss_fn(net(x), y)).backward()
            if step in (2, 5):
                net.fc2.bias.grad[0] = float("inf")
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
            changed.append(float(not torch.equal(before, net.fc2.weight)))
        out[f"{name}.scales"] = torch.tensor(scales, dtype=torch.float64)
        out[f"{name}.changed"] = torch.tensor(changed, dtype=torch.float64)
        out.update({f"{name}.final.{k}": v.clone() for k, v in net.state_dict().items()})
    save_file({k: v.contiguous() for k, v in out.items()}, f"{d}/scaler.safetensors")
else:
    sys.exit(f"unknown command {cmd}")
