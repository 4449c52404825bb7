"""Oracle for tests/training/class_metrics.rs: torchmetrics' multiclass precision, recall, F1
and AUROC on fixed inputs.

  class_metrics.py values OUT
      45 samples of 6 classes (drawn after torch.manual_seed(21)): logits and labels, where
      class 5 is never a label and its logit is always the lowest (so it is neither present nor
      predicted, which macro averages leave out), plus the same logits as softmax
      probabilities. Writes OUT/values.safetensors: the inputs (`in.*`) and torchmetrics'
      values (float32) over the whole set, each metric updated batch by batch as trainbook's
      ranks see the samples (`batches` of 8 per rank over 2 ranks, a DistributedSampler without
      shuffling): MulticlassPrecision, MulticlassRecall and MulticlassF1Score with average
      micro, macro, weighted and None; MulticlassAUROC with thresholds 5 and 50 (macro and
      None) on the logits, and with thresholds 20 on the probabilities.
"""
import sys

import torch
from safetensors.torch import save_file
from torchmetrics.classification import (
    MulticlassAUROC,
    MulticlassF1Score,
    MulticlassPrecision,
    MulticlassRecall,
)

torch.set_num_threads(1)
N, CLASSES, BATCH, RANKS = 45, 6, 8, 2


def rank_batches():
    """The index batches each rank evaluates: DistributedSampler(shuffle=False) pads the 45
    samples to 46 by repeating the first (trainbook leaves the repeat out of its metrics),
    rank r takes every second index from r, in batches of 8."""
    padded = list(range(N)) + list(range(N))[: (-N) % RANKS]
    out = []
    for r in range(RANKS):
        mine = padded[r::RANKS]
        seen = set()
        for k in range(0, len(mine), BATCH):
            batch = []
            for pos, i in enumerate(mine[k : k + BATCH], start=k):
                # The padding repeat sits at the end of the last rank's share.
                if r * 1 + pos * RANKS >= N:
                    continue
                batch.append(i)
            out.append(batch)
    return out


def run(metric, preds, target):
    for batch in rank_batches():
        if batch:
            metric.update(preds[batch], target[batch])
    return metric.compute().float()


def values(out):
    torch.manual_seed(21)
    logits = torch.randn(N, CLASSES) * 2.0
    logits[:, CLASSES - 1] = -20.0
    labels = torch.randint(0, CLASSES - 1, (N,))
    probs = logits.softmax(1)
    tensors = {"in.logits": logits, "in.labels": labels, "in.probs": probs}
    kinds = {"precision": MulticlassPrecision, "recall": MulticlassRecall, "f1": MulticlassF1Score}
    for name, make in kinds.items():
        for average in ["micro", "macro", "weighted", None]:
            m = make(num_classes=CLASSES, average=average)
            tensors[f"{name}_{average or 'none'}"] = run(m, logits, labels)
    for t in [5, 50]:
        for average in ["macro", None]:
            m = MulticlassAUROC(num_classes=CLASSES, thresholds=t, average=average)
            tensors[f"auroc{t}_{average or 'none'}"] = run(m, logits, labels)
    m = MulticlassAUROC(num_classes=CLASSES, thresholds=20, average="macro")
    tensors["auroc20_probs"] = run(m, probs, labels)
    save_file({k: v.contiguous() for k, v in tensors.items()}, f"{out}/values.safetensors")


if __name__ == "__main__":
    {"values": values}[sys.argv[1]](sys.argv[2])
