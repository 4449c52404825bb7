"""PyTorch side of benches/loader.rs: torchvision ImageFolder + DataLoader throughput over one
epoch, batch 16, shuffled, for the course's train and val transforms and the recipe's
augmentations (RandAugment; TrivialAugmentWide + RandomErasing; AugMix). Prints one JSON object."""
import json
import sys
import time

import torch
from torchvision import datasets, transforms

root = sys.argv[1]
pipelines = {
    "train": transforms.Compose([transforms.AutoAugment(), transforms.Resize((244, 244)), transforms.ToTensor()]),
    "val": transforms.Compose([transforms.Resize((244, 244)), transforms.ToTensor()]),
    "ra": transforms.Compose([transforms.RandAugment(), transforms.Resize((244, 244)), transforms.ToTensor()]),
    "ta_wide_erase": transforms.Compose([transforms.TrivialAugmentWide(), transforms.Resize((244, 244)),
                                         transforms.ToTensor(), transforms.RandomErasing(p=0.25)]),
    "augmix": transforms.Compose([transforms.AugMix(), transforms.Resize((244, 244)), transforms.ToTensor()]),
}
results = {}
for name, transform in pipelines.items():
    for workers in (0, 2):
        loader = torch.utils.data.DataLoader(datasets.ImageFolder(root, transform=transform), batch_size=16, shuffle=True, num_workers=workers)
        start, n = time.perf_counter(), 0
        for x, _ in loader:
            n += len(x)
        results[f"{name}/workers={workers}"] = n / (time.perf_counter() - start)
print(json.dumps(results))
