"""PyTorch side of benches/ddp.rs (run under torchrun): ResNet34 3 classes, global batch 16 split
over the ranks, 224px, Adam 1e-4, label smoothing 0.1, DDP over Gloo. Rank 0 prints one JSON line."""
import json
import time

import torch
import torch.distributed as dist
import torchvision

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = torchvision.models.resnet34(num_classes=3)
if world > 1:
    model = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.Adam(model.parameters(), lr=1e-4)
x = torch.randn(16 // world, 3, 224, 224)
y = torch.randint(0, 3, (16 // world,))
loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
for _ in range(2):
    opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()
steps = 6
dist.barrier()
start = time.perf_counter()
for _ in range(steps):
    opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()
dist.barrier()
if rank == 0:
    print(json.dumps({"world": world, "threads": torch.get_num_threads(), "img_per_s": 16 * steps / (time.perf_counter() - start)}))
dist.destroy_process_group()
