"""Oracle for tests/training/losses.rs: torch's losses and torchmetrics' metrics on fixed inputs.

  losses.py losses OUT
      Inputs drawn after torch.manual_seed(11) and every torch.nn loss trainbook mirrors, with
      reduction="mean" and with reduction="none" (then averaged per sample over the remaining
      dimensions): MSELoss, L1Loss, HuberLoss(delta=0.7), SmoothL1Loss(beta=0.6),
      BCEWithLogitsLoss(pos_weight=...), CrossEntropyLoss(label_smoothing=0.1), and
      CrossEntropyLoss with class weights, with an ignore_index (-1, two samples) and with both
      and label smoothing. Writes OUT/losses.safetensors (inputs `in.*`, results `mean.*` and
      `per_sample.*`, and `weights.*`: each sample's weight in the weighted means).
  losses.py metrics OUT
      37 samples of each task (drawn after torch.manual_seed(12)): multi-label logits and
      multi-hot targets (5 labels), regression outputs and targets (2 values each), class
      logits and labels (6 classes). torchmetrics over the whole set: MultilabelStatScores
      (tp, fp, tn, fn per label), MultilabelF1Score (per label and macro), MultilabelExactMatch,
      MeanAbsoluteError, MeanSquaredError(squared=False), MulticlassAccuracy(top_k=3, micro).
      Writes OUT/metrics.safetensors (the inputs) and OUT/metrics.json.
"""
import json
import sys

import torch
import torch.nn as nn
from safetensors.torch import save_file
from torchmetrics.classification import (
    MulticlassAccuracy,
    MultilabelExactMatch,
    MultilabelF1Score,
    MultilabelStatScores,
)
from torchmetrics.regression import MeanAbsoluteError, MeanSquaredError

torch.set_num_threads(1)


def per_sample(elementwise):
    return elementwise if elementwise.dim() <= 1 else elementwise.flatten(1).mean(dim=1)


def losses(out):
    torch.manual_seed(11)
    reg_out, reg_target = torch.randn(6, 3), torch.randn(6, 3)
    ml_logits, ml_target = torch.randn(6, 4), torch.randint(0, 2, (6, 4)).float()
    pos_weight = torch.tensor([0.5, 1.0, 2.0, 3.0])
    ce_logits, ce_labels = torch.randn(6, 5), torch.randint(0, 5, (6,))
    # Class weights, and the labels with samples 1 and 4 set to an ignored label (-1).
    ce_weight = torch.tensor([0.5, 2.0, 1.0, 3.0, 1.5])
    ce_ignored = ce_labels.clone()
    ce_ignored[[1, 4]] = -1
    tensors = {
        "in.ce_weight": ce_weight,
        "in.ce_ignored": ce_ignored,
        "in.reg_out": reg_out,
        "in.reg_target": reg_target,
        "in.ml_logits": ml_logits,
        "in.ml_target": ml_target,
        "in.pos_weight": pos_weight,
        "in.ce_logits": ce_logits,
        "in.ce_labels": ce_labels,
    }
    cases = {
        "mse": (lambda r: nn.MSELoss(reduction=r), reg_out, reg_target),
        "l1": (lambda r: nn.L1Loss(reduction=r), reg_out, reg_target),
        "huber": (lambda r: nn.HuberLoss(reduction=r, delta=0.7), reg_out, reg_target),
        "smooth_l1": (lambda r: nn.SmoothL1Loss(reduction=r, beta=0.6), reg_out, reg_target),
        "bce": (
            lambda r: nn.BCEWithLogitsLoss(reduction=r, pos_weight=pos_weight),
            ml_logits,
            ml_target,
        ),
        "ce": (
            lambda r: nn.CrossEntropyLoss(reduction=r, label_smoothing=0.1),
            ce_logits,
            ce_labels,
        ),
        "ce_weight": (
            lambda r: nn.CrossEntropyLoss(reduction=r, weight=ce_weight),
            ce_logits,
            ce_labels,
        ),
        "ce_weight_ignore": (
            lambda r: nn.CrossEntropyLoss(
                reduction=r, weight=ce_weight, ignore_index=-1, label_smoothing=0.1
            ),
            ce_logits,
            ce_ignored,
        ),
        "ce_ignore": (
            lambda r: nn.CrossEntropyLoss(reduction=r, ignore_index=-1),
            ce_logits,
            ce_ignored,
        ),
    }
    # What a weighted mean divides by: each sample's class weight, 0 where ignored.
    kept = (ce_ignored != -1).double()
    tensors["weights.ce_weight"] = ce_weight.double()[ce_labels]
    tensors["weights.ce_weight_ignore"] = ce_weight.double()[ce_ignored.clamp(min=0)] * kept
    tensors["weights.ce_ignore"] = kept
    for name, (make, a, b) in cases.items():
        tensors[f"mean.{name}"] = make("mean")(a, b)
        tensors[f"per_sample.{name}"] = per_sample(make("none")(a, b))
    save_file({k: v.contiguous() for k, v in tensors.items()}, f"{out}/losses.safetensors")


def metrics(out):
    torch.manual_seed(12)
    n, labels, values, classes = 37, 5, 2, 6
    ml_logits = torch.randn(n, labels)
    ml_target = torch.randint(0, 2, (n, labels))
    reg_out, reg_target = torch.randn(n, values), torch.randn(n, values)
    ce_logits, ce_labels = torch.randn(n, classes), torch.randint(0, classes, (n,))
    save_file(
        {
            "ml_logits": ml_logits,
            "ml_target": ml_target.float(),
            "reg_out": reg_out,
            "reg_target": reg_target,
            "ce_logits": ce_logits,
            "ce_labels": ce_labels,
        },
        f"{out}/metrics.safetensors",
    )
    # trainbook predicts a label where its logit is above 0, i.e. its probability above 0.5:
    # torchmetrics' default threshold on the sigmoid of logits.
    probs = ml_logits.sigmoid()
    stats = MultilabelStatScores(num_labels=labels, average=None)(probs, ml_target)
    result = {
        "label_counts": [[int(s[0]), int(s[1]), int(s[3])] for s in stats],  # tp, fp, fn
        "f1_per_label": MultilabelF1Score(num_labels=labels, average=None)(probs, ml_target).tolist(),
        "f1_macro": MultilabelF1Score(num_labels=labels, average="macro")(probs, ml_target).item(),
        "exact_match": MultilabelExactMatch(num_labels=labels)(probs, ml_target).item(),
        "mae": MeanAbsoluteError()(reg_out, reg_target).item(),
        "rmse": MeanSquaredError(squared=False)(reg_out, reg_target).item(),
        "top3": MulticlassAccuracy(num_classes=classes, top_k=3, average="micro")(
            ce_logits, ce_labels
        ).item(),
    }
    with open(f"{out}/metrics.json", "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    {"losses": losses, "metrics": metrics}[sys.argv[1]](sys.argv[2])
