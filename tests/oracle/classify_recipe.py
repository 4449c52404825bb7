"""Oracle for tests/launch/example_classify.rs: what torchvision's classification reference
(references/classification/train.py) would do with a recipe's flags, from torch itself.

  classify_recipe.py lrs JSON      JSON in: the recipe's lr, epochs, lr_scheduler,
                                   lr_warmup_epochs, lr_warmup_method, lr_warmup_decay,
                                   lr_step_size, lr_gamma, lr_min. Prints the learning rate of
                                   every epoch as JSON: torch's schedulers composed as the
                                   reference composes them (a SequentialLR of the warmup and the
                                   main schedule), stepped once after each epoch.
  classify_recipe.py load MODEL CLASSES PATH [IMAGE_SIZE]
                                   torch.load(PATH) loaded strictly into
                                   torchvision.models.get_model(MODEL, num_classes=CLASSES)
                                   (a Vision Transformer with image_size=IMAGE_SIZE);
                                   prints the number of tensors.
"""
import json
import sys

import torch
import torchvision
from torch.optim import lr_scheduler as S


def main_schedule(opt, c):
    name = c["lr_scheduler"]
    if name == "steplr":
        return S.StepLR(opt, step_size=c["lr_step_size"], gamma=c["lr_gamma"])
    if name == "cosineannealinglr":
        return S.CosineAnnealingLR(opt, T_max=c["epochs"] - c["lr_warmup_epochs"], eta_min=c["lr_min"])
    if name == "exponentiallr":
        return S.ExponentialLR(opt, gamma=c["lr_gamma"])
    raise ValueError(name)


def lrs(c):
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=c["lr"], momentum=0.9)
    main = main_schedule(opt, c)
    warm_epochs = c["lr_warmup_epochs"]
    if warm_epochs > 0:
        make = {"linear": lambda: S.LinearLR(opt, start_factor=c["lr_warmup_decay"], total_iters=warm_epochs),
                "constant": lambda: S.ConstantLR(opt, factor=c["lr_warmup_decay"], total_iters=warm_epochs)}
        warm = make[c["lr_warmup_method"]]()
        sched = S.SequentialLR(opt, schedulers=[warm, main], milestones=[warm_epochs])
    else:
        sched = main
    out = []
    for _ in range(c["epochs"]):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    print(json.dumps(out))


def load(model, classes, path, image_size=None):
    extra = {"image_size": int(image_size)} if image_size else {}
    net = torchvision.models.get_model(model, num_classes=int(classes), **extra)
    state = torch.load(path, weights_only=True)
    net.load_state_dict(state, strict=True)
    print(len(state))


if __name__ == "__main__":
    if sys.argv[1] == "lrs":
        lrs(json.loads(sys.argv[2]))
    else:
        load(*sys.argv[2:6])
