"""PyTorch side of benches/gpu.rs, on the same GPU in the same run. Each command prints one
JSON object on stdout.

  pytorch_gpu.py info
      the GPU's name, torch and CUDA versions, CPU cores
  pytorch_gpu.py step BATCH STEPS f32|bf16 [channels_last] [MODE]
      torchvision's ResNet34 with the course's head (Linear 512-512, ReLU, Linear 512-3) in
      eager mode: Adam 1e-4, CrossEntropyLoss(label_smoothing=0.1), 224 px; the data are 4
      batches kept on the GPU, used in turn; bf16 runs the forward pass and the loss under
      torch.autocast("cuda", torch.bfloat16); loss sum and correct count accumulate on the GPU
      and are read once per 4 steps (as trainbook's epoch reads its metrics). Reports img/s over
      STEPS steps after 4 warm-up steps, and torch.cuda.max_memory_allocated/reserved over the
      timed steps. MODE: eager (the default); benchmark (eager with
      torch.backends.cudnn.benchmark = True); graph (the whole step, zero_grad, forward, loss,
      backward and Adam(capturable=True).step(), captured with torch.cuda.graph after 3 warm-up
      steps on a side stream, as torch's CUDA-graph notes show for a whole network; each step
      copies its batch into the static input and replays); compile (the model under
      torch.compile(mode="reduce-overhead"), Inductor's kernels replayed as CUDA graphs; 8
      warm-up steps, which include the compilation; reports compile_s, the warm-up's seconds).
  pytorch_gpu.py epoch DATA WORKERS [BATCHES]
      the course's DesignSafe training epoch on the GPU: ImageFolder(DATA/Train) with
      AutoAugment(IMAGENET) + Resize((244, 244)) + ToTensor, DataLoader(batch 16, shuffle,
      num_workers=WORKERS, pin_memory=True), .to(cuda, non_blocking=True), the same model and
      recipe as `step` in float32. Reports img/s and the share of the epoch spent waiting for
      the next batch (time inside the loader's __next__), after one warm-up epoch of BATCHES.
  pytorch_gpu.py loader DATA WORKERS
      the same DataLoader alone (no GPU work): img/s over one pass of DATA/Train.
"""
import json
import os
import sys
import time

import torch
import torchvision
from torchvision import datasets, transforms

DEV = torch.device("cuda")


def course_resnet34():
    m = torchvision.models.resnet34(num_classes=3)
    m.fc = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 3))
    return m


def recipe(channels_last=False, capturable=False):
    torch.manual_seed(0)
    model = course_resnet34().to(DEV)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, capturable=capturable)
    return model, opt, torch.nn.CrossEntropyLoss(label_smoothing=0.1)


def train_step(model, opt, loss_fn, x, y, bf16, sums):
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
        logits = model(x)
        loss = loss_fn(logits, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    sums[0] += loss.detach().float() * x.shape[0]
    sums[1] += (logits.argmax(1) == y).sum()


def graphed_step(model, opt, loss_fn, xs, ys, bf16):
    """The whole step captured with torch.cuda.graph; returns step(x, y, sums)."""
    static_x, static_y = xs[0].clone(), ys[0].clone()

    def whole():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            logits = model(static_x)
            loss = loss_fn(logits, static_y)
        loss.backward()
        opt.step()
        return logits, loss

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            whole()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        logits, loss = whole()

    def step(x, y, sums):
        static_x.copy_(x)
        static_y.copy_(y)
        graph.replay()
        sums[0] += loss.detach().float() * x.shape[0]
        sums[1] += (logits.argmax(1) == y).sum()

    return step


def step(batch, steps, precision, channels_last=False, mode="eager"):
    bf16 = precision == "bf16"
    torch.backends.cudnn.benchmark = mode == "benchmark"
    model, opt, loss_fn = recipe(channels_last, capturable=mode == "graph")
    if mode == "compile":
        model = torch.compile(model, mode="reduce-overhead")
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    xs = [torch.randn(batch, 3, 224, 224, device=DEV).contiguous(memory_format=fmt) for _ in range(4)]
    ys = [torch.randint(0, 3, (batch,), device=DEV) for _ in range(4)]
    if mode == "graph":
        one = graphed_step(model, opt, loss_fn, xs, ys, bf16)
    else:
        def one(x, y, sums):
            train_step(model, opt, loss_fn, x, y, bf16, sums)

    def run(n):
        sums = [torch.zeros((), device=DEV), torch.zeros((), device=DEV, dtype=torch.long)]
        for i in range(n):
            one(xs[i % 4], ys[i % 4], sums)
            if i % 4 == 3:
                sums[0].item(), sums[1].item()

    start = time.perf_counter()
    run(8 if mode == "compile" else 4)
    torch.cuda.synchronize()
    warmup_s = time.perf_counter() - start
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    run(steps)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    out = {
        "img_per_s": batch * steps / seconds,
        "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(),
        "mode": mode,
    }
    if mode == "compile":
        out["compile_s"] = warmup_s
    return out


def course_loader(data, workers):
    train = datasets.ImageFolder(
        os.path.join(data, "Train"),
        transform=transforms.Compose([
            transforms.AutoAugment(transforms.AutoAugmentPolicy.IMAGENET),
            transforms.Resize((244, 244)),
            transforms.ToTensor(),
        ]),
    )
    return torch.utils.data.DataLoader(
        train, batch_size=16, shuffle=True, num_workers=workers, pin_memory=True
    )


def epoch(data, workers, warmup_batches=8):
    torch.backends.cudnn.benchmark = False
    model, opt, loss_fn = recipe()
    loader = course_loader(data, workers)
    model.train()
    # Warm-up: cuDNN's first calls, the workers' first start.
    sums = [torch.zeros((), device=DEV), torch.zeros((), device=DEV, dtype=torch.long)]
    for i, (x, y) in enumerate(loader):
        train_step(model, opt, loss_fn, x.to(DEV, non_blocking=True), y.to(DEV, non_blocking=True), False, sums)
        if i + 1 == warmup_batches:
            break
    torch.cuda.synchronize()
    waited, seen = 0.0, 0
    start = time.perf_counter()
    it = iter(loader)
    while True:
        t = time.perf_counter()
        try:
            x, y = next(it)
        except StopIteration:
            break
        waited += time.perf_counter() - t
        train_step(model, opt, loss_fn, x.to(DEV, non_blocking=True), y.to(DEV, non_blocking=True), False, sums)
        seen += x.shape[0]
    sums[0].item()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    return {"img_per_s": seen / seconds, "data_wait_share": waited / seconds, "seconds": seconds, "images": seen}


def loader_only(data, workers):
    loader = course_loader(data, workers)
    start, seen = time.perf_counter(), 0
    for x, _ in loader:
        seen += x.shape[0]
    return {"img_per_s": seen / (time.perf_counter() - start), "images": seen}


def info():
    return {
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "cpu_cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "info":
        out = info()
    elif cmd == "step":
        rest = argv[5:]
        modes = [a for a in rest if a in ("eager", "benchmark", "graph", "compile")]
        out = step(int(argv[2]), int(argv[3]), argv[4], "channels_last" in rest, modes[0] if modes else "eager")
    elif cmd == "epoch":
        out = epoch(argv[2], int(argv[3]), int(argv[4]) if len(argv) > 4 else 8)
    elif cmd == "loader":
        out = loader_only(argv[2], int(argv[3]))
    else:
        sys.exit(__doc__)
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv)
