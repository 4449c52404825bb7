"""torch's speed switches as a fresh process has them, for tests/training/backends.rs: prints
one JSON object (cudnn.benchmark, cudnn.allow_tf32, get_float32_matmul_precision(), and
cuda.matmul.allow_tf32 after set_float32_matmul_precision("high"))."""
import json

import torch

out = {
    "cudnn_benchmark": torch.backends.cudnn.benchmark,
    "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
    "float32_matmul_precision": torch.get_float32_matmul_precision(),
}
torch.set_float32_matmul_precision("high")
out["matmul_allow_tf32_after_high"] = torch.backends.cuda.matmul.allow_tf32
print(json.dumps(out))
