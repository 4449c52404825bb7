"""Oracle for tests/parity/memory_format.rs: torchvision's ResNet34 with the course head, given
trainbook's weights, input and gradients (FILE: w.* weights, x, y, g.* gradients, logits),
runs the same training-mode forward/backward in the layout LAYOUT (default | channels_last) and
prints the largest relative difference of the logits and of any gradient from trainbook's.
Usage: channels_last.py FILE LAYOUT"""
import sys

import torch
import torchvision
from safetensors.torch import load_file

torch.set_num_threads(1)
path, layout = sys.argv[1], sys.argv[2]
d = load_file(path)
m = torchvision.models.resnet34()
m.fc = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 3))
m.load_state_dict({k[2:]: v for k, v in d.items() if k.startswith("w.")}, strict=True)
x = d["x"]
if layout == "channels_last":
    m = m.to(memory_format=torch.channels_last)
    x = x.contiguous(memory_format=torch.channels_last)
m.train()
logits = m(x)
torch.nn.functional.cross_entropy(logits, d["y"]).backward()


def rel(a, b):
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()


worst = max(rel(d["g." + n], p.grad) for n, p in m.named_parameters())
print(rel(d["logits"], logits.detach()), worst)
