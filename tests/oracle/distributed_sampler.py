"""Oracle for tests/parity/sampler_parity.rs: reads a JSON list of sampler configurations on stdin
and prints, for each, the indices and len() of torch.utils.data.DistributedSampler."""
import json
import sys

from torch.utils.data import DistributedSampler

out = []
for c in json.load(sys.stdin):
    s = DistributedSampler(range(c["len"]), num_replicas=c["replicas"], rank=c["rank"],
                           shuffle=c["shuffle"], seed=c["seed"], drop_last=c["drop_last"])
    s.set_epoch(c["epoch"])
    out.append({"indices": list(iter(s)), "len": len(s)})
json.dump(out, sys.stdout)
