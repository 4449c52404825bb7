"""Oracle for tests/parity/models_parity.rs (torch/torchvision in the venv).

  models.py resnet DIR        torchvision resnet34 + the course head (fc.0/fc.2, 3 classes), random
                              weights and BN statistics, eval-mode output on a fixed input:
                              DIR/resnet.safetensors (state_dict), DIR/io.safetensors (x, y)
  models.py load DIR FILE     loads FILE (saved by trainbook) into the same architecture with
                              strict=True and prints the max |diff| of its output against DIR/io y_rust
  models.py optim DIR         MnistNet-shaped model, 5 steps each of SGD(momentum, nesterov, wd),
                              Adam(wd), AdamW, each single-tensor and foreach/fused, on fixed data with
                              CrossEntropyLoss(label_smoothing=0.1)
                              in eval mode (no dropout): DIR/optim.safetensors
  models.py load_mnist FILE X loads FILE (strict) into the MNIST Net, prints its eval output on X
  models.py schedules         JSON of ReduceLROnPlateau / StepLR / CosineAnnealingLR lr sequences
"""
import json
import sys

import torch
import torchvision
from safetensors.torch import load_file, save_file

torch.manual_seed(0)


def course_resnet():
    m = torchvision.models.resnet34()
    m.fc = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 3))
    return m


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 32, 3, 1)
        self.conv2 = torch.nn.Conv2d(32, 64, 3, 1)
        self.fc1 = torch.nn.Linear(9216, 128)
        self.fc2 = torch.nn.Linear(128, 10)

    def forward(self, x):
        x = torch.relu(self.conv2(torch.relu(self.conv1(x))))
        x = torch.flatten(torch.nn.functional.max_pool2d(x, 2), 1)
        return self.fc2(torch.relu(self.fc1(x)))


def random_batchnorm(m):
    """Random affine parameters and statistics for every BatchNorm of `m` (drawn in module
    order), so that evaluation mode is no identity."""
    for mod in m.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.2, 0.2)
            mod.running_var.uniform_(0.5, 1.5)
            mod.weight.data.uniform_(0.5, 1.5)
            mod.bias.data.uniform_(-0.2, 0.2)


def eval_and_train_pass(m, classes, d):
    """`m` (random BatchNorm given) saved as DIR/weights.safetensors, and DIR/io.safetensors:
    input x [2, 3, 64, 64], the eval-mode logits, then after torch.manual_seed(1) (dropout's
    draws, if any) the train-mode logits, the gradients grad.* of (logits * w).sum() and the
    running statistics after.* the pass updated."""
    random_batchnorm(m)
    save_file({k: v.contiguous() for k, v in m.state_dict().items()}, f"{d}/weights.safetensors")
    x, w = torch.randn(2, 3, 64, 64), torch.randn(2, classes)
    m.eval()
    with torch.no_grad():
        y_eval = m(x)
    m.train()
    torch.manual_seed(1)
    y_train = m(x)
    (y_train * w).sum().backward()
    io = {"x": x, "w": w, "y_eval": y_eval, "y_train": y_train.detach()}
    io.update({f"grad.{n}": p.grad for n, p in m.named_parameters()})
    io.update({f"after.{n}": b for n, b in m.named_buffers() if "running" in n})
    save_file({k: v.contiguous() for k, v in io.items()}, f"{d}/io.safetensors")


if __name__ == "__main__":  # importable: amp.py and clip.py take Net and course_resnet, vision_models.py and
    # tests/parity/resnet_family.rs eval_and_train_pass
    cmd = sys.argv[1]
    if cmd == "resnet":
        d = sys.argv[2]
        m = course_resnet()
        random_batchnorm(m)
        m.eval()
        x = torch.randn(2, 3, 96, 80)
        with torch.no_grad():
            y = m(x)
        save_file({k: v.contiguous() for k, v in m.state_dict().items()}, f"{d}/resnet.safetensors")
        save_file({"x": x, "y": y}, f"{d}/io.safetensors")
    elif cmd == "load":
        d, path = sys.argv[2], sys.argv[3]
        m = course_resnet()
        m.load_state_dict(load_file(path), strict=True)
        m.eval()
        io = load_file(f"{d}/io.safetensors")
        with torch.no_grad():
            y = m(io["x"])
        print(float((y - load_file(f"{d}/rust_out.safetensors")["y"]).abs().max()))
    elif cmd == "optim":
        d = sys.argv[2]
        net = Net()
        init = {k: v.clone() for k, v in net.state_dict().items()}
        x = torch.rand(8, 1, 28, 28)
        y = torch.randint(0, 10, (8,))
        out = {f"init.{k}": v for k, v in init.items()}
        out["x"], out["y"] = x, y
        loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
        # Each rule in torch.optim's single-tensor loop and in its multi-tensor implementation
        # (foreach for SGD, fused for Adam/AdamW): trainbook's Kernels::PerTensor / MultiTensor.
        makers = {
            "sgd": lambda p, multi: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3, foreach=multi),
            "adam": lambda p, multi: torch.optim.Adam(p, lr=1e-3, weight_decay=1e-3, foreach=False, fused=multi),
            "adamw": lambda p, multi: torch.optim.AdamW(p, lr=1e-3, foreach=False, fused=multi),
        }
        variants = [(f"{n}.{impl}", make, impl == "multi") for n, make in makers.items() for impl in ("single", "multi")]
        for name, make, multi in variants:
            net.load_state_dict(init)
            net.eval()
            opt = make(net.parameters(), multi)
            losses = []
            for _ in range(5):
                opt.zero_grad()
                loss = loss_fn(net(x), y)
                loss.backward()
                opt.step()
                losses.append(loss.item())
            for k, v in net.state_dict().items():
                out[f"{name}.{k}"] = v.clone()
            out[f"{name}.losses"] = torch.tensor(losses, dtype=torch.float64)
        save_file({k: v.contiguous() for k, v in out.items()}, f"{d}/optim.safetensors")
    elif cmd == "load_mnist":
        net = Net()
        missing, unexpected = net.load_state_dict(load_file(sys.argv[2]), strict=True)
        x = load_file(sys.argv[3])["x"]
        net.eval()
        with torch.no_grad():
            print(json.dumps(net(x).tolist()))
    elif cmd == "schedules":
        p = [torch.nn.Parameter(torch.zeros(1))]
        metrics = [1.0, 0.9, 0.95, 0.95, 0.95, 0.89, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.88, 0.88, 0.88, 0.88]
        res = {}
        for mode, sign in (("min", 1.0), ("max", -1.0)):
            opt = torch.optim.SGD(p, lr=0.1)
            s = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode=mode, factor=0.5, patience=2, cooldown=1, min_lr=0.01)
            lrs = []
            for v in metrics:
                s.step(sign * v)
                lrs.append(opt.param_groups[0]["lr"])
            res[f"plateau_{mode}"] = lrs
        opt = torch.optim.SGD(p, lr=0.1)
        s = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
        res["step"] = []
        for _ in range(10):
            opt.step(); s.step(); res["step"].append(opt.param_groups[0]["lr"])
        opt = torch.optim.SGD(p, lr=0.1)
        s = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4, eta_min=0.001)
        res["cosine"] = []
        for _ in range(12):
            opt.step(); s.step(); res["cosine"].append(opt.param_groups[0]["lr"])
        print(json.dumps(res))
