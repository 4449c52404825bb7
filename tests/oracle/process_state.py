"""What a process running PyTorch's side of a test sees, as JSON on stdout: its thread count, CPU
capability, default seed, a seeded matrix product's bits, its arguments, working directory, one
environment variable, the first line of its stdin and Python's path head. tests/tooling/
oracle_server.rs compares a fresh Python's answer with the oracle server's forked child's.

    python tests/oracle/process_state.py EXIT_CODE [ARGS...]
"""
import hashlib
import json
import os
import sys

import torch

if os.environ.get("TRAINBOOK_PROBE_PIDFILE"):  # who runs this, for the test that kills its caller
    with open(os.environ["TRAINBOOK_PROBE_PIDFILE"], "w") as f:
        f.write(str(os.getpid()))
default_seed = torch.initial_seed()  # before any seeding: the generator's default
torch.manual_seed(0)
x = torch.randn(64, 300)
product = x @ x.T  # a reduction that a thread count could reorder
state = {
    "default_seed": default_seed,
    "threads": torch.get_num_threads(),
    "capability": torch.backends.cpu.get_cpu_capability(),
    "product_sha256": hashlib.sha256(product.numpy().tobytes()).hexdigest(),
    "argv": sys.argv[1:],
    "cwd": os.getcwd(),
    "probe": os.environ.get("TRAINBOOK_PROBE"),
    "stdin": sys.stdin.readline().strip(),
    "path0": sys.path[0],
    "main": __name__,
}
print(json.dumps(state, sort_keys=True))
print("to stderr", file=sys.stderr)
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
