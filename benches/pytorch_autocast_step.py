"""PyTorch side of benches/autocast_step.rs: one round of the ResNet34 3-class train step
(batch 16, 224px, fused Adam 1e-4, label smoothing 0.1) on a fixed batch, forward and loss under
torch.autocast("cpu", dtype=torch.bfloat16) (or plain float32 with `f32`), backward and the
optimizer step outside it. 2 warm-up steps, then STEPS timed ones; prints the median seconds of
each phase and of the whole step as JSON.

  pytorch_autocast_step.py STEPS [bf16|f32]
"""
import json
import sys
import time

import torch
import torchvision

torch.manual_seed(0)
steps = int(sys.argv[1])
autocast = (sys.argv[2] if len(sys.argv) > 2 else "bf16") == "bf16"
m = torchvision.models.resnet34(num_classes=3)
opt = torch.optim.Adam(m.parameters(), lr=1e-4, fused=True)
x, y = torch.randn(16, 3, 224, 224), torch.randint(0, 3, (16,))
loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
m.train()
phases = {"zero_grad": [], "forward": [], "backward": [], "optimizer": [], "step": []}
for i in range(2 + steps):
    t0 = time.perf_counter()
    opt.zero_grad()
    z = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        loss = loss_fn(m(x), y)
    t1 = time.perf_counter()
    loss.backward()
    t2 = time.perf_counter()
    opt.step()
    t3 = time.perf_counter()
    if i >= 2:
        for name, t in [("zero_grad", z - t0), ("forward", t1 - z), ("backward", t2 - t1),
                        ("optimizer", t3 - t2), ("step", t3 - t0)]:
            phases[name].append(t)
print(json.dumps({k: sorted(v)[len(v) // 2] for k, v in phases.items()}
                 | {"threads": torch.get_num_threads()}))
