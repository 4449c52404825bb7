"""Oracle for tests/training/ema.rs: timm's ModelEmaV2 itself (timm in the venv), one thread.

  ema.py steps DIR   a small conv net with BatchNorm (seed 5) trained 6 SGD steps (momentum
                     0.9, lr 0.1, train mode: the running statistics move) on random data, with
                     ModelEmaV2(model, decay=0.9) updated after every step, as timm's train
                     script does. DIR/steps.safetensors: stepK.NAME, the model's state after
                     step K (K = 0 is the start), and ema.NAME, the average after the last
                     update (float tensors; num_batches_tracked left out: trainbook's models do
                     not count batches).
  ema.py torchvision DIR
                     the same net trained 2 epochs of 5 batches with torchvision's
                     classification reference's average: an AveragedModel(use_buffers=True)
                     with its ema_avg (decay 0.8), updated when i % 2 == 0 and reset to copying
                     during warmup epoch 0, as its train_one_epoch does. DIR/torchvision.safetensors:
                     stepK.NAME (K = 0..10) and ema.NAME.
"""
import sys

import torch
from safetensors.torch import save_file
from timm.utils import ModelEmaV2

torch.set_num_threads(1)


def net():
    torch.manual_seed(5)
    model = torch.nn.Sequential()
    model.add_module("conv", torch.nn.Conv2d(1, 4, 3))
    model.add_module("bn", torch.nn.BatchNorm2d(4))
    model.add_module("relu", torch.nn.ReLU())
    model.add_module("flat", torch.nn.Flatten())
    model.add_module("fc", torch.nn.Linear(4 * 6 * 6, 3))
    return model


def floats(sd):
    return {k: v.clone() for k, v in sd.items() if v.is_floating_point()}


def torchvision_average(out):
    model = net()
    decay = 0.8

    def ema_avg(avg, param, num_averaged):
        return decay * avg + (1 - decay) * param

    ema = torch.optim.swa_utils.AveragedModel(model, avg_fn=ema_avg, use_buffers=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(8, 1, 8, 8)
    y = torch.randint(0, 3, (8,))
    tensors = {f"step0.{k}": v for k, v in floats(model.state_dict()).items()}
    model.train()
    k = 0
    for epoch in range(2):
        for i in range(5):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            k += 1
            if i % 2 == 0:
                ema.update_parameters(model)
                if epoch < 1:
                    ema.n_averaged.fill_(0)
            tensors.update({f"step{k}.{n}": v for n, v in floats(model.state_dict()).items()})
    tensors.update({f"ema.{n}": v for n, v in floats(ema.module.state_dict()).items()})
    save_file({k: v.contiguous() for k, v in tensors.items()}, f"{out}/torchvision.safetensors")


def main(cmd, out):
    if cmd == "torchvision":
        return torchvision_average(out)
    assert cmd == "steps", cmd
    model = net()
    ema = ModelEmaV2(model, decay=0.9)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(8, 1, 8, 8)
    y = torch.randint(0, 3, (8,))
    tensors = {f"step0.{k}": v for k, v in floats(model.state_dict()).items()}
    model.train()
    for k in range(1, 7):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        ema.update(model)
        tensors.update({f"step{k}.{n}": v for n, v in floats(model.state_dict()).items()})
    tensors.update({f"ema.{n}": v for n, v in floats(ema.module.state_dict()).items()})
    save_file({k: v.contiguous() for k, v in tensors.items()}, f"{out}/steps.safetensors")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
