"""PyTorch side of benches/ddp.rs (run under torchrun): ResNet34 3 classes, global batch 16 split
over the ranks (and over TB_ACCUMULATE micro-batches per step), 224px, Adam 1e-4, label smoothing
0.1, DDP over Gloo. Rank 0 prints one JSON line."""
import contextlib
import json
import os
import time

import torch
import torch.distributed as dist
import torchvision

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
accumulate = int(os.environ.get("TB_ACCUMULATE", "1"))
torch.manual_seed(0)
model = torchvision.models.resnet34(num_classes=3)
ddp = torch.nn.parallel.DistributedDataParallel(model) if world > 1 else None
net = ddp or model
opt = torch.optim.Adam(model.parameters(), lr=1e-4)
micro = 16 // world // accumulate
x = torch.randn(micro, 3, 224, 224)
y = torch.randint(0, 3, (micro,))
loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1)


def step():
    opt.zero_grad()
    for i in range(accumulate):
        last = i == accumulate - 1
        with ddp.no_sync() if ddp is not None and not last else contextlib.nullcontext():
            (loss_fn(net(x), y) / accumulate).backward()
    opt.step()


for _ in range(2):
    step()
steps = 6
dist.barrier()
start = time.perf_counter()
for _ in range(steps):
    step()
dist.barrier()
if rank == 0:
    print(json.dumps({"world": world, "threads": torch.get_num_threads(), "img_per_s": 16 * steps / (time.perf_counter() - start)}))
dist.destroy_process_group()
