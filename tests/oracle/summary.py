"""Oracle for tests/parity/model_summary.rs: PyTorch's own counts of torchvision's ResNet34.

  summary.py counts
      torchvision.models.resnet34(num_classes=3) with every parameter outside `fc` frozen
      (requires_grad False): for each top-level child, the number of parameter values and of
      trainable ones (sum of numel over child.parameters()); the totals; the bytes of the
      parameters; the output shape for a [2, 3, 64, 64] input. Prints JSON.
"""
import json
import sys

import torch
import torchvision


def counts():
    m = torchvision.models.resnet34(num_classes=3)
    for name, p in m.named_parameters():
        p.requires_grad_(name.startswith("fc."))
    rows = []
    for name, child in m.named_children():
        ps = list(child.parameters())
        if ps:
            n = sum(p.numel() for p in ps)
            t = sum(p.numel() for p in ps if p.requires_grad)
            rows.append([name, n, t])
    params = list(m.parameters())
    out = m.eval()(torch.zeros(2, 3, 64, 64))
    print(json.dumps({
        "rows": rows,
        "total": sum(p.numel() for p in params),
        "trainable": sum(p.numel() for p in params if p.requires_grad),
        "bytes": sum(p.numel() * p.element_size() for p in params),
        "output_shape": list(out.shape),
    }))


if __name__ == "__main__":
    {"counts": counts}[sys.argv[1]]()
