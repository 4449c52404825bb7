"""Oracle for tests/parity/torch_hub.rs: torch.hub's and torchvision's own answers.

  torch_hub.py dirs          JSON list of torch.hub.get_dir() under the environments given as
                             JSON on stdin ([{"TORCH_HOME": ..., ...}, ...]; each replaces those
                             three variables)
  torch_hub.py hashes NAME.. JSON list of the hash prefix torch.hub reads from each file name
                             (None where it finds none)
  torch_hub.py urls          JSON: [model, weights name, url] of every ResNet, ResNeXt, Wide ResNet, MobileNet, ConvNeXt, VGG, AlexNet, SqueezeNet, RegNet, ShuffleNet V2, MNASNet, DenseNet and ViT weights enum
  torch_hub.py sha256 FILE   the file's SHA-256, hex
"""
import hashlib
import json
import os
import sys

import torch.hub


def dirs():
    out = []
    for env in json.load(sys.stdin):
        for name in ("TORCH_HOME", "XDG_CACHE_HOME", "HOME"):
            os.environ.pop(name, None)
            if env.get(name) is not None:
                os.environ[name] = env[name]
        out.append(torch.hub.get_dir())
    print(json.dumps(out))


def hashes(names):
    out = []
    for n in names:
        m = torch.hub.HASH_REGEX.search(n)
        out.append(m.group(1) if m else None)
    print(json.dumps(out))


def urls():
    import torchvision.models as models
    out = []
    names = [f"resnet{depth}" for depth in (18, 34, 50, 101, 152)] + [
        "resnext50_32x4d", "resnext101_32x8d", "resnext101_64x4d", "wide_resnet50_2",
        "wide_resnet101_2", "mobilenet_v3_large", "mobilenet_v3_small",
        "convnext_tiny", "convnext_small", "convnext_base", "convnext_large", "mobilenet_v2",
        "alexnet", "squeezenet1_0", "squeezenet1_1"] + [
        f"vgg{depth}{bn}" for depth in (11, 13, 16, 19) for bn in ("", "_bn")] + [
        f"regnet_{kind}_{size}" for kind in "yx"
        for size in ("400mf", "800mf", "1_6gf", "3_2gf", "8gf", "16gf", "32gf")] + [
        "regnet_y_128gf", "shufflenet_v2_x0_5", "shufflenet_v2_x1_0", "shufflenet_v2_x1_5",
        "shufflenet_v2_x2_0", "mnasnet0_5", "mnasnet0_75", "mnasnet1_0", "mnasnet1_3",
        "densenet121", "densenet161", "densenet169", "densenet201", "vit_b_16", "vit_b_32",
        "vit_l_16", "vit_l_32"]
    for name in names:
        for w in models.get_model_weights(name):
            out.append([name, w.name, w.url])
    print(json.dumps(out))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "dirs":
        dirs()
    elif cmd == "hashes":
        hashes(sys.argv[2:])
    elif cmd == "urls":
        urls()
    elif cmd == "sha256":
        print(hashlib.sha256(open(sys.argv[2], "rb").read()).hexdigest())
