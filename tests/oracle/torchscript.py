"""Oracle for tests/parity/torchscript.rs: a model defined in PyTorch, saved as TorchScript,
trained by PyTorch; and a trainbook model exported as TorchScript, run by PyTorch.

  torchscript.py make DIR
      A small CNN (conv 3->8, BatchNorm, ReLU, max-pool, a second conv 8->8 with its BatchNorm,
      a linear head to 3 classes) initialised after torch.manual_seed(0), scripted with
      torch.jit.script and saved as DIR/model.pt; 40 random 3x8x8 images and their labels
      (seed 1). Then the saved module, loaded with torch.jit.load, is trained as trainbook's
      fit trains it: 2 epochs of 5 unshuffled batches of 8, SGD(lr=0.05, momentum=0.9,
      foreach=True: trainbook's default kernels), cross-entropy, and after each epoch a
      validation pass (evaluation mode, no gradients, 2 batches of 20). The same training of a
      fresh load again with every forward and loss inside torch.autocast("cpu",
      dtype=torch.bfloat16), as fit's Precision::Bf16 runs them. Writes
      DIR/make.safetensors: "images", "labels", and "trained.NAME" (float32) and
      "trained_bf16.NAME" (autocast) for every parameter and buffer of the trained module.
  torchscript.py make DIR cuda
      The same on the GPU (tests/gpu_parts/torchscript.rs): the module loaded onto cuda:0,
      the data moved there, autocast on "cuda", in the deterministic mode
      (torch.use_deterministic_algorithms(True), cuDNN deterministic and not benchmarking, as
      the GPU suite's Rust side runs). The tensors are written back on the CPU.
  torchscript.py export DIR
      Loads DIR/traced.pt (written by trainbook) with torch.jit.load and runs it on "input" of
      DIR/export_input.safetensors; writes DIR/export.safetensors {"output": ...} and prints
      the names of the module's parameters and buffers, one a line.
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

torch.set_num_threads(1)


class SmallNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(8)
        self.head = nn.Linear(8 * 4 * 4, 3)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.relu(self.bn2(self.conv2(x)))
        return self.head(torch.flatten(x, 1))


def make(out, device="cpu"):
    device = torch.device(device)
    if device.type == "cuda":
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    torch.manual_seed(0)
    torch.jit.script(SmallNet()).save(f"{out}/model.pt")
    g = torch.Generator().manual_seed(1)
    images = torch.randn(40, 3, 8, 8, generator=g)
    labels = torch.randint(0, 3, (40,), generator=g)
    state = {}
    for prefix, bf16 in (("trained", False), ("trained_bf16", True)):
        model = train(f"{out}/model.pt", images.to(device), labels.to(device), bf16)
        tensors = list(model.named_parameters()) + list(model.named_buffers())
        state.update({f"{prefix}.{k}": v.detach().cpu().contiguous() for k, v in tensors})
    save_file({"images": images, "labels": labels, **state}, f"{out}/make.safetensors")


def train(path, images, labels, bf16):
    """The saved module of `path`, loaded and trained as fit trains it (see make)."""
    model = torch.jit.load(path, map_location=images.device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, foreach=True)
    region = lambda: torch.autocast(images.device.type, dtype=torch.bfloat16, enabled=bf16)
    for _epoch in range(2):
        model.train()
        for b in range(5):
            x, y = images[8 * b : 8 * b + 8], labels[8 * b : 8 * b + 8]
            with region():
                loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        # fit's validation after each epoch (evaluation mode, no gradients, batches of 20):
        # it runs the module's forward in another mode, which the graph executor sees.
        model.eval()
        with torch.no_grad(), region():
            for b in range(2):
                model(images[20 * b : 20 * b + 20])
    return model


def export(out):
    model = torch.jit.load(f"{out}/traced.pt")
    x = load_file(f"{out}/export_input.safetensors")["input"]
    with torch.no_grad():
        y = model(x)
    save_file({"output": y.contiguous()}, f"{out}/export.safetensors")
    for name, _ in list(model.named_parameters()) + list(model.named_buffers()):
        print(name)


if __name__ == "__main__":
    {"make": make, "export": export}[sys.argv[1]](*sys.argv[2:])
