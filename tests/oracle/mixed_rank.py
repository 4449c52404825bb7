"""A PyTorch rank for tests/distributed/mixed_groups.rs: it joins a group whose other ranks are
trainbook processes, through torch.distributed.init_process_group(backend="gloo",
init_method="env://") exactly as a user's script would (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT from the launcher).

  mixed_rank.py check       the collectives of trainbook's c10d-check, with the same tensors:
                            all-reduce of [4] floats and of 2^20 floats, broadcast of [3] doubles
                            from the last rank, all-gather of [2] int64, barrier
  mixed_rank.py ddp OUT     the course ResNet34 under torch DDP for STEPS steps on its own shard,
                            then OUT/python_rank{R}.safetensors with the parameters
"""
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
import torchvision
from safetensors.torch import save_file

STEPS = 3
LR = 0.05


def course_resnet():
    """torchvision's ResNet34 with the course's head, as trainbook's resnet34_classifier(3)."""
    m = torchvision.models.resnet34()
    m.fc = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 3))
    return m


def check():
    rank, world = dist.get_rank(), dist.get_world_size()
    small = torch.full([4], float(rank + 1))
    dist.all_reduce(small)
    total = world * (world + 1) // 2
    assert torch.equal(small, torch.full([4], float(total))), small
    n = 1 << 20
    big = torch.arange(n, dtype=torch.float32) * (rank + 1)
    dist.all_reduce(big)
    assert torch.allclose(big, torch.arange(n, dtype=torch.float32) * total, rtol=1e-6, atol=1e-3)
    root = world - 1
    b = torch.full([3], float(rank), dtype=torch.float64)
    dist.broadcast(b, root)
    assert torch.equal(b, torch.full([3], float(root), dtype=torch.float64)), b
    mine = torch.tensor([rank * 10, rank * 10 + 1], dtype=torch.int64)
    slots = [torch.empty(2, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(slots, mine)
    for r, t in enumerate(slots):
        assert t.tolist() == [r * 10, r * 10 + 1], (r, t)
    dist.barrier()
    print(f"python rank {rank}/{world}: allreduce sum={total} ok, broadcast ok, all_gather ok, barrier ok", flush=True)


def ddp(out):
    rank = dist.get_rank()
    torch.manual_seed(7 + rank)  # DDP must replace these weights with rank 0's
    model = course_resnet()
    # trainbook's BatchNorm has no num_batches_tracked counter (it only matters with
    # momentum=None); without it both sides broadcast the same list of buffers.
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.num_batches_tracked = None
    model = torch.nn.parallel.DistributedDataParallel(model)
    torch.manual_seed(100 + rank)
    x = torch.randn(4, 3, 48, 40)
    y = torch.randint(3, [4])
    # torch.optim.SGD's multi-tensor update, the kernels trainbook's Optimizer uses by default.
    opt = torch.optim.SGD(model.parameters(), lr=LR, foreach=True)
    for _ in range(STEPS):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    params = {n: p.detach().contiguous() for n, p in model.module.named_parameters()}
    save_file(params, os.path.join(out, f"python_rank{rank}.safetensors"))
    print(f"python rank {rank}: {STEPS} DDP steps done", flush=True)


def main():
    torch.set_num_threads(1)
    # A bounded wait, so that a test whose other rank died fails instead of hanging.
    timeout = timedelta(seconds=int(os.environ.get("TRAINBOOK_DIST_TIMEOUT", "60")))
    dist.init_process_group(backend="gloo", init_method="env://", timeout=timeout)
    if sys.argv[1] == "check":
        check()
    elif sys.argv[1] == "ddp":
        ddp(sys.argv[2])
        # trainbook's Dist::destroy waits for every rank before leaving; so does this rank.
        dist.barrier()
    else:
        raise SystemExit(f"unknown mode {sys.argv[1]}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
