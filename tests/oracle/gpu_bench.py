"""PyTorch side of tests/gpu.rs's throughput test: img/s of torchvision's ResNet34 (3 classes)
training on the GPU with bf16 autocast and channels_last, batches from a pinned-memory
DataLoader with 2 workers, SGD momentum 0.9.  Usage: gpu_bench.py BATCH STEPS"""
import sys
import time

import torch
import torchvision

batch, steps = int(sys.argv[1]), int(sys.argv[2])
torch.backends.cudnn.benchmark = True
dev = torch.device("cuda")
model = torchvision.models.resnet34(num_classes=3).to(dev, memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
loss_fn = torch.nn.CrossEntropyLoss()


def loader(batches):
    n = batch * batches
    ds = torch.utils.data.TensorDataset(torch.randn(n, 3, 224, 224), torch.randint(0, 3, (n,)))
    return torch.utils.data.DataLoader(ds, batch_size=batch, num_workers=2, pin_memory=True)


def epoch(data):
    seen = 0
    for x, y in data:
        x = x.to(dev, non_blocking=True).contiguous(memory_format=torch.channels_last)
        y = y.to(dev, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        seen += x.shape[0]
    return seen


epoch(loader(5))
torch.cuda.synchronize()
timed = loader(steps)
start = time.perf_counter()
seen = epoch(timed)
torch.cuda.synchronize()
print(seen / (time.perf_counter() - start))
