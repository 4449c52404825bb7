"""PyTorch side of benches/checkpoint.rs: torch.save (+ os.sync) and torch.load of a ResNet34
(3 classes) + Adam state dict in DIR. Prints one JSON object with the best of 3 (seconds)."""
import json
import os
import sys
import time

import torch
import torchvision

d = sys.argv[1]
m = torchvision.models.resnet34(num_classes=3)
opt = torch.optim.Adam(m.parameters(), 1e-4)
m(torch.randn(2, 3, 64, 64)).sum().backward()
opt.step()
state = {"model": m.state_dict(), "opt": opt.state_dict(), "epoch": 1}
path = os.path.join(d, "ck.pt")
saves, loads = [], []
for _ in range(3):
    t = time.perf_counter(); torch.save(state, path); os.sync(); saves.append(time.perf_counter() - t)
    t = time.perf_counter(); torch.load(path); loads.append(time.perf_counter() - t)
print(json.dumps({"save_s": min(saves), "load_s": min(loads), "bytes": os.path.getsize(path)}))
