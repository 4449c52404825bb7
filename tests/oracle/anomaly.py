"""Oracle for tests/training/anomaly.rs: what torch's anomaly detection says.

  anomaly.py message
      A linear layer (784 -> 10) whose outputs, shifted by -1e6, go through a square root
      (every logit NaN) into CrossEntropyLoss, on a batch of 4 random 28x28 pictures; the
      backward pass under torch.autograd.detect_anomaly(). Prints the RuntimeError's message.
"""
import sys
import warnings

import torch

torch.manual_seed(0)


def message():
    lin = torch.nn.Linear(784, 10)
    x, y = torch.randn(4, 1, 28, 28), torch.randint(10, (4,))
    warnings.simplefilter("ignore")  # the forward trace anomaly mode prints
    with torch.autograd.detect_anomaly():
        logits = (lin(x.flatten(1)) - 1e6).sqrt()
        loss = torch.nn.CrossEntropyLoss()(logits, y)
        try:
            loss.backward()
        except RuntimeError as e:
            print(str(e))
            return
    raise SystemExit("no anomaly was detected")


if __name__ == "__main__":
    {"message": message}[sys.argv[1]]()
