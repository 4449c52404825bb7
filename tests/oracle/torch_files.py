"""Oracle for tests/parity/torch_files.rs: files of torch.save, written by PyTorch for trainbook
to read, and trainbook's files read back by torch.load (weights_only=True, its default).

  torch_files.py write DIR   DIR/hub/checkpoints/resnet18-f37072fd.pth: torch.save of a seeded
                             torchvision resnet18's state_dict (random BatchNorm statistics too),
                             under the file name torchvision's hub cache gives ImageNet weights;
                             DIR/io.safetensors: x [2,3,64,64] and its eval-mode logits y;
                             DIR/course.pt: the course's checkpoint dict after one Adam step
                             (epoch, model_state_dict, optimizer_state_dict, loss);
                             DIR/reference.pth: torchvision train.py's checkpoint layout
                             (model, optimizer, lr_scheduler, epoch, args: argparse.Namespace);
                             DIR/views.pt: views sharing one storage, other
                             dtypes, big and negative ints, a set; DIR/legacy.pt: the pre-1.6 format. Prints JSON: the course loss as
                             float.hex, the optimizer state's keys and param_groups' params.
  torch_files.py optim DIR   the course's Net (models.py) in eval mode, fixed x, y; for SGD
                             (momentum 0.9, nesterov, weight decay 1e-4, lr 0.05) and Adam (lr
                             1e-3, weight decay 1e-4): 2 steps, then DIR/<opt>_ckpt.pt
                             {model_state_dict, optimizer_state_dict, epoch}, then 3 more steps:
                             DIR/<opt>_after.safetensors; DIR/io.safetensors: x, y
  torch_files.py optim_continue DIR OPT
                             loads DIR/rust_OPT.pt (trainbook's model and torch_state_dict()) into
                             the Net and torch.optim (load_state_dict), takes one step:
                             DIR/OPT_torch_next.safetensors
  torch_files.py read DIR    torch.load(weights_only=True) of DIR/from_rust.pth into resnet18
                             (strict), eval logits on DIR/io.safetensors x; and of
                             DIR/from_rust_values.pt. Prints JSON: whether the logits equal
                             DIR/rust_y.safetensors y bit for bit, and the values as Python sees
                             them.
"""
import argparse
import json
import os
import sys

import torch
import torchvision
from safetensors.torch import load_file, save_file

torch.set_num_threads(2)


def seeded_resnet18():
    torch.manual_seed(0)
    m = torchvision.models.resnet18()
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.1, 0.1)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.1, 0.1)
    return m


def write(d):
    m = seeded_resnet18().eval()
    hub = os.path.join(d, "hub", "checkpoints")
    os.makedirs(hub, exist_ok=True)
    torch.save(m.state_dict(), os.path.join(hub, "resnet18-f37072fd.pth"))
    torch.manual_seed(1)
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        y = m(x)
    save_file({"x": x, "y": y}, os.path.join(d, "io.safetensors"))

    m.train()
    opt = torch.optim.Adam(m.parameters(), lr=1e-4)
    loss = torch.nn.functional.cross_entropy(m(x), torch.tensor([3, 7]))
    loss.backward()
    opt.step()
    torch.save(
        {
            "epoch": 3,
            "model_state_dict": m.state_dict(),
            "optimizer_state_dict": opt.state_dict(),
            "loss": loss.item(),
        },
        os.path.join(d, "course.pt"),
    )
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=30, gamma=0.1)
    args = argparse.Namespace(model="resnet18", lr=0.1, epochs=90)
    torch.save(
        {"model": m.state_dict(), "optimizer": opt.state_dict(),
         "lr_scheduler": sched.state_dict(), "epoch": 0, "args": args},
        os.path.join(d, "reference.pth"),
    )
    base = torch.arange(12.0).view(3, 4)
    torch.save(
        {"base": base, "row": base[1], "col": base[:, 2], "t": base.t(),
         "half": torch.arange(3, dtype=torch.float16), "long": torch.tensor([-(2**40)]),
         "mask": torch.tensor([True, False]), "big": 2**40, "neg": -5, "pi": 3.25,
         "nested": [(1, "x"), {"k": None}], "classes": {"C0", "C2"}},
        os.path.join(d, "views.pt"),
    )
    torch.save({"a": torch.ones(2)}, os.path.join(d, "legacy.pt"),
               _use_new_zipfile_serialization=False)
    state = opt.state_dict()
    print(json.dumps({
        "loss_hex": float(loss.item()).hex(),
        "state_keys": sorted(state["state"].keys()),
        "params": state["param_groups"][0]["params"],
        "lr": state["param_groups"][0]["lr"],
    }))


def describe(v):
    if isinstance(v, torch.Tensor):
        return {"tensor": str(v.dtype), "shape": list(v.shape), "values": v.float().flatten().tolist()}
    if isinstance(v, dict):
        return {"dict": [[repr(k), describe(x)] for k, x in v.items()]}
    if isinstance(v, (list, tuple)):
        return {type(v).__name__: [describe(x) for x in v]}
    if isinstance(v, float):
        return {"float": v.hex()}
    return {type(v).__name__: v}


def read(d):
    m = torchvision.models.resnet18()
    m.load_state_dict(torch.load(os.path.join(d, "from_rust.pth"), weights_only=True), strict=True)
    m.eval()
    x = load_file(os.path.join(d, "io.safetensors"))["x"]
    with torch.no_grad():
        y = m(x)
    rust_y = load_file(os.path.join(d, "rust_y.safetensors"))["y"]
    values = torch.load(os.path.join(d, "from_rust_values.pt"), weights_only=True)
    print(json.dumps({"logits_equal": bool(torch.equal(y, rust_y)), "values": describe(values)}))


def make_opt(name, net):
    if name == "sgd":
        return torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                               weight_decay=1e-4)
    return torch.optim.Adam(net.parameters(), lr=1e-3, weight_decay=1e-4)


def step(net, opt, x, y):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(net(x), y).backward()
    opt.step()


def optim(d):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from models import Net
    torch.manual_seed(0)
    x, y = torch.randn(8, 1, 28, 28), torch.randint(0, 10, (8,))
    save_file({"x": x, "y": y}, os.path.join(d, "io.safetensors"))
    for name in ("sgd", "adam"):
        torch.manual_seed(1)
        net = Net().eval()
        opt = make_opt(name, net)
        for _ in range(2):
            step(net, opt, x, y)
        torch.save({"model_state_dict": net.state_dict(), "optimizer_state_dict": opt.state_dict(),
                    "epoch": 2}, os.path.join(d, f"{name}_ckpt.pt"))
        for _ in range(3):
            step(net, opt, x, y)
        save_file(dict(net.state_dict()), os.path.join(d, f"{name}_after.safetensors"))


def optim_continue(d, name):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from models import Net
    io = load_file(os.path.join(d, "io.safetensors"))
    ckpt = torch.load(os.path.join(d, f"rust_{name}.pt"), weights_only=True)
    net = Net().eval()
    net.load_state_dict(ckpt["model_state_dict"], strict=True)
    opt = make_opt(name, net)
    opt.param_groups[0]["lr"] = 123.0  # overwritten by the loaded state, as torch does
    opt.load_state_dict(ckpt["optimizer_state_dict"])
    step(net, opt, io["x"], io["y"])
    save_file(dict(net.state_dict()), os.path.join(d, f"{name}_torch_next.safetensors"))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "optim_continue":
        optim_continue(sys.argv[2], sys.argv[3])
    else:
        {"write": write, "read": read, "optim": optim}[cmd](sys.argv[2])
