"""Oracle for tests/parity/vision_models.rs: torchvision's MobileNetV3 and ConvNeXt (any
get_model name).

  vision_models.py legacy DIR      a DenseNet-121 and a small ViT saved with torchvision's older
                                    parameter names (DIR/<name>.pth) and their eval logits
  vision_models.py list            JSON: list_models(module=torchvision.models), torchvision's
                                    classification models
  vision_models.py names NAME...    JSON: for every network, its state_dict (name, shape) and
                                    named_parameters() order (built on the meta device)
  vision_models.py pass NAME DIR    get_model(NAME, num_classes=5) from seed 0 (NAME vit_test:
                                    VisionTransformer(image_size=64, patch_size=16,
                                    num_layers=2, num_heads=4, hidden_dim=64, mlp_dim=128),
                                    its zero head drawn normal with std 0.5), its BatchNorm
                                    layers given random affine parameters and statistics (so
                                    that evaluation mode is no identity); writes
                                    DIR/weights.safetensors (the state_dict) and
                                    DIR/io.safetensors: input x [2, 3, 64, 64], the eval-mode
                                    logits, then after torch.manual_seed(1) (dropout's and
                                    stochastic depth's draws)
                                    the train-mode logits, the gradients grad.* of
                                    (logits * w).sum() and the running statistics after.* the
                                    pass updated. One thread.
  vision_models.py eval_sizes MODEL:WEIGHTS...
                                    JSON: for every pair, [resize_size, crop_size,
                                    interpolation] of get_weight(f"{enum}.{WEIGHTS}")
                                    .transforms() for get_model_weights(MODEL)'s enum
"""
import json
import sys

import os

import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from models import eval_and_train_pass  # noqa: E402

torch.set_num_threads(1)

# RegNet's widths are computed with tensors (BlockParams.from_init_params), which the meta
# device of `names` cannot read back: compute them on the CPU.
_from_init_params = torchvision.models.regnet.BlockParams.from_init_params.__func__


def _widths_on_cpu(cls, *args, **kwargs):
    with torch.device("cpu"):
        return _from_init_params(cls, *args, **kwargs)


torchvision.models.regnet.BlockParams.from_init_params = classmethod(_widths_on_cpu)


def eval_sizes(pairs):
    out = {}
    for pair in pairs:
        model, weights = pair.split(":")
        t = getattr(torchvision.models.get_model_weights(model), weights).transforms()
        out[pair] = [t.resize_size[0], t.crop_size[0], t.interpolation.value]
    print(json.dumps(out))


def names(models):
    out = {}
    for name in models:
        with torch.device("meta"):
            m = torchvision.models.get_model(name, num_classes=1000)
        out[name] = {
            "state": [[k, list(v.shape)] for k, v in m.state_dict().items()],
            "params": [n for n, _ in m.named_parameters()],
        }
    print(json.dumps(out))


def one_pass(name, d):
    torch.manual_seed(0)
    if name == "vit_test":
        # A Vision Transformer small enough for a test: torchvision's class with two blocks of
        # width 64 and 4 heads, on 64-pixel images in patches of 16; its zero head drawn at
        # random so that every gradient flows.
        m = torchvision.models.VisionTransformer(
            image_size=64, patch_size=16, num_layers=2, num_heads=4, hidden_dim=64, mlp_dim=128,
            num_classes=5,
        )
        torch.nn.init.normal_(m.heads.head.weight, std=0.5)
        torch.nn.init.normal_(m.heads.head.bias, std=0.5)
    else:
        m = torchvision.models.get_model(name, num_classes=5)
    eval_and_train_pass(m, 5, d)


def legacy(d):
    """torchvision's weights files with the older parameter names its loaders rename: a
    DenseNet-121 (norm.1, conv.1, ...) and the small Vision Transformer of `pass vit_test`
    (mlp.linear_1, mlp.linear_2), random, as DIR/<name>.pth, with an input and each one's
    eval-mode logits in DIR/io.safetensors."""
    import re
    from safetensors.torch import save_file
    from models import random_batchnorm
    torch.manual_seed(0)
    nets = {
        "densenet121": torchvision.models.densenet121(num_classes=5),
        "vit_test": torchvision.models.VisionTransformer(
            image_size=64, patch_size=16, num_layers=2, num_heads=4, hidden_dim=64,
            mlp_dim=128, num_classes=5,
        ),
    }
    torch.nn.init.normal_(nets["vit_test"].heads.head.weight, std=0.5)
    x = torch.randn(2, 3, 64, 64)
    io = {"x": x}
    layer = re.compile(r"^(.*denselayer\d+\.(?:norm|relu|conv))([12])\.(weight|bias|running_mean|running_var|num_batches_tracked)$")
    mlp = re.compile(r"^(.*\.mlp\.)([03])\.(weight|bias)$")
    for name, m in nets.items():
        random_batchnorm(m)
        m.eval()
        with torch.no_grad():
            io[name] = m(x)
        old = {}
        for k, v in m.state_dict().items():
            if (g := layer.match(k)):
                if g.group(3) != "num_batches_tracked":  # the old files have none
                    old[f"{g.group(1)}.{g.group(2)}.{g.group(3)}"] = v
            elif (g := mlp.match(k)):
                old[f"{g.group(1)}linear_{1 if g.group(2) == '0' else 2}.{g.group(3)}"] = v
            else:
                old[k] = v
        torch.save(old, f"{d}/{name}.pth")
    save_file(io, f"{d}/io.safetensors")


if __name__ == "__main__":
    if sys.argv[1] == "legacy":
        legacy(sys.argv[2])
    elif sys.argv[1] == "list":
        print(json.dumps(torchvision.models.list_models(module=torchvision.models)))
    elif sys.argv[1] == "names":
        names(sys.argv[2:])
    elif sys.argv[1] == "eval_sizes":
        eval_sizes(sys.argv[2:])
    else:
        one_pass(sys.argv[2], sys.argv[3])
