"""Oracle for tests/training/regression.rs: examples/mnist_regression.rs's training loop written in
PyTorch, one thread.

  regression.py init OUT SEED
      PyTorch's MNIST example network with one output (conv1 1->32, conv2 32->64, fc1
      9216->128, fc2 128->1), initialised by torch after torch.manual_seed(SEED), saved as
      OUT/init.safetensors.
  regression.py train DATA OUT SEED EPOCHS BATCH LR TRAIN_N TEST_N
      The example's run from OUT/init.safetensors: the first TRAIN_N / TEST_N pictures of
      MNIST's splits in DATA, each label's value as a [1] float target; ToTensor + Normalize
      (0.1307, 0.3081); DistributedSampler(num_replicas=1, rank=0, shuffle=True, seed=SEED)
      with set_epoch; Adam(lr, fused=True); MSE; dropout seeded with torch.manual_seed(SEED)
      before training (the loaders draw from their own generators, not the global one).
      Every epoch is evaluated on the test pictures. The figures are summed as trainbook
      documents its metrics: the training loss as the batch means times the batch sizes in
      float64, the validation loss as the float64 sums of the per-sample losses, MAE and RMSE
      from float64 sums of |error| and error^2 over every value. Writes OUT/torch.json (one
      object per epoch) and OUT/torch.safetensors (the final weights).
"""
import gzip
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from PIL import Image
from safetensors.torch import load_file, save_file
from torchvision import transforms

torch.set_num_threads(1)


class Net(nn.Module):
    """pytorch/examples' MNIST network with `outputs` outputs."""

    def __init__(self, outputs):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, outputs)

    def forward(self, x):
        x = F.relu(self.conv2(F.relu(self.conv1(x))))
        x = F.dropout(F.max_pool2d(x, 2), 0.25, self.training)
        x = F.dropout(F.relu(self.fc1(torch.flatten(x, 1))), 0.5, self.training)
        return self.fc2(x)


def read_idx(root, name):
    for d in (root, os.path.join(root, "MNIST", "raw")):
        for f in (name, name + ".gz"):
            path = os.path.join(d, f)
            if os.path.exists(path):
                data = (gzip.open if f.endswith(".gz") else open)(path, "rb").read()
                dims = data[3]
                shape = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(dims)]
                return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)
    raise FileNotFoundError(f"{name} in {root}")


class DigitValues(torch.utils.data.Dataset):
    def __init__(self, root, train, limit):
        prefix = "train" if train else "t10k"
        self.images = read_idx(root, f"{prefix}-images-idx3-ubyte")[:limit]
        self.labels = read_idx(root, f"{prefix}-labels-idx1-ubyte")[:limit]
        self.t = transforms.Compose(
            [transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))]
        )

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        image = self.t(Image.fromarray(self.images[i], mode="L"))
        return image, torch.tensor([float(self.labels[i])])


def evaluate(model, loader):
    model.eval()
    loss_sum, abs_sum, sq_sum, values, count = 0.0, 0.0, 0.0, 0, 0
    with torch.no_grad():
        for x, y in loader:
            out = model(x)
            per_sample = F.mse_loss(out, y, reduction="none").mean(dim=1)
            loss_sum += per_sample.sum(dtype=torch.float64).item()
            diff = out.double() - y.double()
            abs_sum += diff.abs().sum(dtype=torch.float64).item()
            sq_sum += diff.square().sum(dtype=torch.float64).item()
            values += y.numel()
            count += len(y)
    return loss_sum / count, abs_sum / values, math.sqrt(sq_sum / values)


def loaders(train_set, test_set, seed, batch):
    """The example's loaders: the training set shuffled by a DistributedSampler of one replica
    (to call set_epoch on), batches of `batch`; the test set in order, batches of 1000."""
    sampler = torch.utils.data.DistributedSampler(
        train_set, num_replicas=1, rank=0, shuffle=True, seed=seed
    )
    # Own generators: a loader without one draws its base seed from the global generator,
    # which would shift the dropout masks.
    train_loader = torch.utils.data.DataLoader(
        train_set, batch_size=batch, sampler=sampler, generator=torch.Generator()
    )
    test_loader = torch.utils.data.DataLoader(
        test_set, batch_size=1000, generator=torch.Generator()
    )
    return sampler, train_loader, test_loader


def train(data, out, seed, epochs, batch, lr, train_n, test_n):
    model = Net(1)
    model.load_state_dict(load_file(f"{out}/init.safetensors"))
    train_set, test_set = DigitValues(data, True, train_n), DigitValues(data, False, test_n)
    sampler, train_loader, test_loader = loaders(train_set, test_set, seed, batch)
    opt = torch.optim.Adam(model.parameters(), lr=lr, fused=True)
    torch.manual_seed(seed)
    epochs_out = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        model.train()
        loss_sum, abs_sum, sq_sum, values, count = 0.0, 0.0, 0.0, 0, 0
        for x, y in train_loader:
            pred = model(x)
            loss = F.mse_loss(pred, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss_sum += loss.detach().double().item() * len(y)
            diff = pred.detach().double() - y.double()
            abs_sum += diff.abs().sum(dtype=torch.float64).item()
            sq_sum += diff.square().sum(dtype=torch.float64).item()
            values += y.numel()
            count += len(y)
        val_loss, val_mae, val_rmse = evaluate(model, test_loader)
        epochs_out.append(
            {
                "train_loss": loss_sum / count,
                "train_mae": abs_sum / values,
                "train_rmse": math.sqrt(sq_sum / values),
                "val_loss": val_loss,
                "val_mae": val_mae,
                "val_rmse": val_rmse,
            }
        )
    with open(f"{out}/torch.json", "w") as f:
        json.dump(epochs_out, f)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, f"{out}/torch.safetensors")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "init":
        out, seed = args[0], int(args[1])
        torch.manual_seed(seed)
        state = Net(1).state_dict()
        save_file({k: v.contiguous() for k, v in state.items()}, f"{out}/init.safetensors")
    elif cmd == "train":
        data, out = args[0], args[1]
        seed, epochs, batch = int(args[2]), int(args[3]), int(args[4])
        lr, train_n, test_n = float(args[5]), int(args[6]), int(args[7])
        train(data, out, seed, epochs, batch, lr, train_n, test_n)
    else:
        raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
