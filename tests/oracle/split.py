"""Oracle for tests/data/data_split.rs.

  split.py indices    stdin JSON {"splits": [{n, lengths, seed}], "samplers": [{indices, seed,
                      epochs}]} -> {"splits": [[indices of each part]], "samplers": [[indices of
                      each epoch]]}: torch's random_split and SubsetRandomSampler, each with
                      torch.Generator().manual_seed(seed); with "weighted": [{weights,
                      num_samples, seed, epochs}] also -> "weighted": [[indices of each epoch]]
                      from WeightedRandomSampler(weights, num_samples, generator=...)
  split.py folder ROOT IMAGE...
                      -> {"classes", "samples": [[path, target]], "tensors": [{shape, data}]}:
                      torchvision's ImageFolder(ROOT) and ToTensor()(default_loader(IMAGE))
"""
import json
import sys
import warnings

import torch

warnings.simplefilter("ignore")  # random_split warns about empty parts

cmd = sys.argv[1]
if cmd == "indices":
    from torch.utils.data import SubsetRandomSampler, WeightedRandomSampler, random_split

    q = json.load(sys.stdin)
    splits = []
    for c in q["splits"]:
        g = torch.Generator().manual_seed(c["seed"])
        splits.append([list(s.indices) for s in random_split(range(c["n"]), c["lengths"], generator=g)])
    samplers = []
    for c in q["samplers"]:
        s = SubsetRandomSampler(c["indices"], generator=torch.Generator().manual_seed(c["seed"]))
        samplers.append([list(s) for _ in range(c["epochs"])])
    weighted = []
    for c in q.get("weighted", []):
        g = torch.Generator().manual_seed(c["seed"])
        s = WeightedRandomSampler(c["weights"], c["num_samples"], generator=g)
        weighted.append([list(s) for _ in range(c["epochs"])])
    json.dump({"splits": splits, "samplers": samplers, "weighted": weighted}, sys.stdout)
elif cmd == "folder":
    from torchvision.datasets import ImageFolder
    from torchvision.datasets.folder import default_loader
    from torchvision.transforms import ToTensor

    ds = ImageFolder(sys.argv[2])
    tensors = []
    for path in sys.argv[3:]:
        t = ToTensor()(default_loader(path))
        tensors.append({"shape": list(t.shape), "data": t.flatten().tolist()})
    json.dump({"classes": ds.classes, "samples": ds.samples, "tensors": tensors}, sys.stdout)
