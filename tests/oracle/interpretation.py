"""Oracle for tests/parity/interpretation.rs: what fastai's ClassificationInterpretation computes
from a model's outputs, with torch (fastai itself is not installed; its few lines are followed).

  interpretation.py interp OUT
      OUT/interp.safetensors: `logits` [40, 5] (torch.manual_seed(0), randn times 3), `targets`
      [40] (randint 5), `losses` (F.cross_entropy(reduction="none")), `probs` (softmax),
      `top_index` (the 10 largest losses' indices, torch.sort descending, stable) and
      `confused` [K, 3]: fastai's most_confused(min_val=2) as (actual, predicted, count) rows:
      the confusion matrix with its diagonal zeroed, the pairs at or above min_val in
      row-major order, sorted by count descending (Python's stable sort, reverse=True).
"""
import sys
from operator import itemgetter

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file


def main(cmd, out):
    assert cmd == "interp", cmd
    torch.set_num_threads(1)
    torch.manual_seed(0)
    logits = torch.randn(40, 5) * 3
    targets = torch.randint(5, (40,))
    losses = F.cross_entropy(logits, targets, reduction="none")
    probs = logits.softmax(1)
    top = torch.sort(losses, descending=True, stable=True).indices[:10]
    preds = probs.argmax(1)
    cm = np.zeros((5, 5), dtype=np.int64)
    for a, p in zip(targets.tolist(), preds.tolist()):
        cm[a, p] += 1
    np.fill_diagonal(cm, 0)
    res = [(i, j, cm[i, j]) for i, j in zip(*np.where(cm >= 2))]
    res = sorted(res, key=itemgetter(2), reverse=True)
    confused = torch.tensor([[int(a), int(p), int(n)] for a, p, n in res], dtype=torch.int64)
    save_file({"logits": logits, "targets": targets, "losses": losses, "probs": probs,
               "top_index": top, "confused": confused.reshape(-1, 3)},
              f"{out}/interp.safetensors")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
