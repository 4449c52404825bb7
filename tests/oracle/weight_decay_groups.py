"""The parameter groups of torchvision's classification reference (`--norm-weight-decay`,
`--bias-weight-decay`), for tests/training/param_groups.rs: for each torchvision model named on
argv, its parameters and buffers (names, shapes) and, for the settings "norm" (norm layers
apart) and "norm+bias" (also every parameter named `bias` apart, checked before the norm
layers) and "norm+bias+embeddings" (also --transformer-embedding-decay's keys, after `bias`),
the names in each non-empty group in order: the rest, then the norm layers' (modules
that are instances of torch's normalisation classes), then the biases'. Printed as JSON."""
import json
import sys

import torch
from torchvision import models

NORMS = (
    torch.nn.modules.batchnorm._BatchNorm,
    torch.nn.LayerNorm,
    torch.nn.GroupNorm,
    torch.nn.modules.instancenorm._InstanceNorm,
    torch.nn.LocalResponseNorm,
)


# The reference's custom keys for --transformer-embedding-decay, after "bias".
EMBEDDINGS = ["class_token", "position_embedding", "relative_position_bias_table"]


def groups(model, with_bias, with_embeddings=False):
    keys = (["bias"] if with_bias else []) + (EMBEDDINGS if with_embeddings else [])
    out = {"other": [], "norm": [], **{k: [] for k in keys}}

    def walk(module, prefix):
        for local, p in module.named_parameters(recurse=False):
            if not p.requires_grad:
                continue
            full = f"{prefix}.{local}" if prefix else local
            if local in keys:
                out[local].append(full)
            elif isinstance(module, NORMS):
                out["norm"].append(full)
            else:
                out["other"].append(full)
        for child, m in module.named_children():
            walk(m, f"{prefix}.{child}" if prefix else child)

    walk(model, "")
    return [[k, v] for k, v in out.items() if v]


result = {}
for name in sys.argv[1:]:
    model = getattr(models, name)(weights=None)
    result[name] = {
        "params": [[n, list(p.shape)] for n, p in model.named_parameters()],
        "buffers": [[n, list(b.shape)] for n, b in model.named_buffers()],
        "norm": groups(model, False),
        "norm+bias": groups(model, True),
        "norm+bias+embeddings": groups(model, True, True),
    }
print(json.dumps(result))
