"""PyTorch side of benches/train_step.rs. Prints one JSON object:
  resnet34: img/s of the ResNet34 3-class train step (batch 16, 224px, fused Adam 1e-4, label
            smoothing 0.1) on a fixed batch (median step), in float32 and under
            torch.autocast("cpu", dtype=torch.bfloat16); and in float32 with a DataLoader
  mnist:    seconds of one MNIST training epoch (batch 64, Adam 1e-3, 0 loader workers) on ROOT
"""
import json
import os
import sys
import tempfile
import time

import torch
import torchvision
from torchvision import datasets, transforms

torch.manual_seed(0)
out = {"threads": torch.get_num_threads()}
m = torchvision.models.resnet34(num_classes=3)
# fused=True: the kernel trainbook's Adam runs (torch's CPU default is the per-tensor loop).
opt = torch.optim.Adam(m.parameters(), lr=1e-4, fused=True)
x = torch.randn(16, 3, 224, 224)
y = torch.randint(0, 3, (16,))
loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
m.train()
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 8


def step_rate(autocast):
    """img/s of the median of `steps` steps on the fixed batch, after 2 warm-up steps."""
    times = []
    for i in range(2 + steps):
        start = time.perf_counter()
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = loss_fn(m(x), y)
        loss.backward()
        opt.step()
        if i >= 2:
            times.append(time.perf_counter() - start)
    return 16 / sorted(times)[len(times) // 2]


out["resnet34_img_per_s"] = step_rate(False)
out["resnet34_bf16_img_per_s"] = step_rate(True)

# float32 steps with each batch from a DataLoader over a TensorDataset (0 workers), 2 warm-up.
def loader(batches):
    ds = torch.utils.data.TensorDataset(torch.randn(16 * batches, 3, 224, 224),
                                        torch.randint(0, 3, (16 * batches,)))
    return torch.utils.data.DataLoader(ds, batch_size=16, num_workers=0)


for xb, yb in loader(2):
    opt.zero_grad(); loss_fn(m(xb), yb).backward(); opt.step()
timed = loader(steps)
start = time.perf_counter()
for xb, yb in timed:
    opt.zero_grad(); loss_fn(m(xb), yb).backward(); opt.step()
out["resnet34_loader_img_per_s"] = 16 * steps / (time.perf_counter() - start)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 32, 3, 1)
        self.conv2 = torch.nn.Conv2d(32, 64, 3, 1)
        self.dropout1, self.dropout2 = torch.nn.Dropout(0.25), torch.nn.Dropout(0.5)
        self.fc1, self.fc2 = torch.nn.Linear(9216, 128), torch.nn.Linear(128, 10)

    def forward(self, x):
        x = torch.relu(self.conv2(torch.relu(self.conv1(x))))
        x = torch.flatten(self.dropout1(torch.nn.functional.max_pool2d(x, 2)), 1)
        return self.fc2(self.dropout2(torch.relu(self.fc1(x))))


# torchvision reads ROOT/MNIST/raw/*: point that at the IDX directory.
root = tempfile.mkdtemp()
os.makedirs(f"{root}/MNIST")
os.symlink(os.path.abspath(sys.argv[1]), f"{root}/MNIST/raw")
ds = datasets.MNIST(root, train=True, download=False,
                    transform=transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))]))
loader = torch.utils.data.DataLoader(ds, batch_size=64, shuffle=True, num_workers=0)
net = Net()
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
net.train()
start = time.perf_counter()
for xb, yb in loader:
    opt.zero_grad(); torch.nn.functional.cross_entropy(net(xb), yb).backward(); opt.step()
out["mnist_epoch_s"] = time.perf_counter() - start
out["mnist_samples"] = len(ds)
print(json.dumps(out))
