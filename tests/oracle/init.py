"""Oracle for tests/parity/models_init.rs: PyTorch's initial weights.

  init.py weights OUT
      OUT/weights.safetensors: `mnist.NAME`, pytorch/examples' MNIST `Net` built right after
      torch.manual_seed(5) (its default init, in its order); and `resnet34.NAME`, the weights
      of torchvision's resnet34(num_classes=3) after torch.manual_seed(5) (torchvision's
      init: Kaiming-normal convolutions, BatchNorm weight 1 and bias 0, a torch.nn.Linear fc).
"""
import sys

import torch
import torchvision
from safetensors.torch import save_file


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 32, 3, 1)
        self.conv2 = torch.nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = torch.nn.Dropout(0.25)
        self.dropout2 = torch.nn.Dropout(0.5)
        self.fc1 = torch.nn.Linear(9216, 128)
        self.fc2 = torch.nn.Linear(128, 10)


def main(cmd, out):
    assert cmd == "weights", cmd
    torch.manual_seed(5)
    tensors = {f"mnist.{k}": v for k, v in Net().state_dict().items()}
    torch.manual_seed(5)
    resnet = torchvision.models.resnet34(num_classes=3).state_dict()
    tensors.update({f"resnet34.{k}": v for k, v in resnet.items() if v.is_floating_point()})
    save_file({k: v.contiguous() for k, v in tensors.items()}, f"{out}/weights.safetensors")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
