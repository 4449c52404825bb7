"""Oracle for tests/parity/sampler_parity.rs's repeated-augmentation test: reads a JSON list of
configurations on stdin and prints, for each, the indices and len() of timm's RepeatAugSampler,
which is torchvision's references/classification RASampler (both from DeiT) for data sets of 256
samples or more. torchvision's sampler seeds its generator with seed + epoch, timm's with the
epoch: the configuration's "generator_seed" is that sum."""
import json
import sys

from timm.data.distributed_sampler import RepeatAugSampler

out = []
for c in json.load(sys.stdin):
    s = RepeatAugSampler(range(c["len"]), num_replicas=c["replicas"], rank=c["rank"],
                         shuffle=c["shuffle"], num_repeats=c["reps"])
    s.set_epoch(c["generator_seed"])
    out.append({"indices": list(iter(s)), "len": len(s)})
json.dump(out, sys.stdout)
