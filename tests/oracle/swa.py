"""Oracle for tests/training/swa.rs: torch.optim.swa_utils' AveragedModel and update_bn.

  swa.py swa OUT
      A small CNN (Conv2d 3->4, BatchNorm2d(4), ReLU, AdaptiveAvgPool2d, Flatten, Linear 4->3)
      drawn after torch.manual_seed(5), on one thread. Three times: its parameters move by a
      seeded step and its BatchNorm statistics change, then AveragedModel.update_parameters.
      Then update_bn over 20 seeded 8x8 pictures in batches of 5 (no shuffle), and the averaged
      model's eval-mode logits on them. Writes OUT/swa.safetensors: `init.*` (the model's first
      weights), `snap{i}.*` (the model at each update), `sd.*` (AveragedModel.state_dict() after
      the updates), `bn.*` (the averaged model's state after update_bn), `x`, `y`, `logits`.
"""
import sys

import torch
import torch.nn as nn
from safetensors.torch import save_file
from torch.optim.swa_utils import AveragedModel, update_bn

torch.set_num_threads(1)


def main(out):
    torch.manual_seed(5)
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(4, 3),
    )
    tensors = {f"init.{k}": v.clone() for k, v in model.state_dict().items()}
    swa = AveragedModel(model)
    for i in range(3):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.1)
            model[1].running_mean.add_(0.5 * (i + 1))
            model[1].running_var.mul_(1.5)
        tensors.update({f"snap{i}.{k}": v.clone() for k, v in model.state_dict().items()})
        swa.update_parameters(model)
    tensors.update({f"sd.{k}": v.clone() for k, v in swa.state_dict().items()})
    x, y = torch.randn(20, 3, 8, 8), torch.randint(0, 3, (20,))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=5)
    update_bn(loader, swa)
    tensors.update({f"bn.{k}": v.clone() for k, v in swa.module.state_dict().items()})
    swa.eval()
    with torch.no_grad():
        tensors["logits"] = swa(x)
    tensors["x"], tensors["y"] = x, y
    save_file({k: v.contiguous() for k, v in tensors.items()}, f"{out}/swa.safetensors")


if __name__ == "__main__":
    assert sys.argv[1] == "swa", sys.argv
    main(sys.argv[2])
