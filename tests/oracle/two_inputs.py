"""Oracle for tests/training/two_inputs.rs: examples/mnist_two_inputs.rs's training loop written
in PyTorch, one thread.

  two_inputs.py init OUT SEED
      The example's model (pytorch/examples' MNIST network with 64 outputs as `body`, a
      Linear(64 + 1, 2) as `head`), initialised by torch after torch.manual_seed(SEED), saved
      as OUT/init.safetensors.
  two_inputs.py train DATA OUT SEED EPOCHS BATCH LR TRAIN_N TEST_N
      The example's run from OUT/init.safetensors: the first TRAIN_N / TEST_N pictures of
      MNIST's splits in DATA; sample i comes with the number (7 i + 3) mod 10 as a [1]
      float, and its class is 1 where the pictured digit is greater, else 0; ToTensor + Normalize (0.1307, 0.3081);
      DistributedSampler(num_replicas=1, rank=0, shuffle=True, seed=SEED) with set_epoch;
      Adam(lr, fused=True); cross-entropy; dropout seeded with torch.manual_seed(SEED) before
      training. Every epoch is evaluated on the test pictures. The figures are summed as
      trainbook documents its metrics: the training loss as the batch means times the batch
      sizes in float64, the validation loss as the float64 sum of the per-sample losses, the
      accuracies as correct counts over sample counts. Writes OUT/torch.json (one object per
      epoch) and OUT/torch.safetensors (the final weights).
"""
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from regression import DigitValues, Net, loaders  # noqa: E402  (the same network, data, loaders)

torch.set_num_threads(1)


class CompareModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = Net(64)
        self.head = nn.Linear(64 + 1, 2)

    def forward(self, x, number):
        return self.head(torch.cat([F.relu(self.body(x)), number], 1))


class DigitVsNumber(DigitValues):
    """regression.py's pictures; sample i with the number (7 i + 3) mod 10 and the class
    "is the digit greater"."""

    def __getitem__(self, i):
        image, value = super().__getitem__(i)
        number = (7 * i + 3) % 10
        return image, torch.tensor([float(number)]), int(int(value.item()) > number)


def evaluate(model, loader):
    model.eval()
    loss_sum, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for x, number, y in loader:
            out = model(x, number)
            loss_sum += F.cross_entropy(out, y, reduction="none").sum(dtype=torch.float64).item()
            correct += (out.argmax(1) == y).sum().item()
            count += len(y)
    return loss_sum / count, correct / count


def train(data, out, seed, epochs, batch, lr, train_n, test_n):
    model = CompareModel()
    model.load_state_dict(load_file(f"{out}/init.safetensors"))
    train_set, test_set = DigitVsNumber(data, True, train_n), DigitVsNumber(data, False, test_n)
    sampler, train_loader, test_loader = loaders(train_set, test_set, seed, batch)
    opt = torch.optim.Adam(model.parameters(), lr=lr, fused=True)
    torch.manual_seed(seed)
    epochs_out = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        model.train()
        loss_sum, correct, count = 0.0, 0, 0
        for x, number, y in train_loader:
            logits = model(x, number)
            loss = F.cross_entropy(logits, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss_sum += loss.detach().double().item() * len(y)
            correct += (logits.argmax(1) == y).sum().item()
            count += len(y)
        val_loss, val_acc = evaluate(model, test_loader)
        epochs_out.append(
            {
                "train_loss": loss_sum / count,
                "train_acc": correct / count,
                "val_loss": val_loss,
                "val_acc": val_acc,
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
        state = CompareModel().state_dict()
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
