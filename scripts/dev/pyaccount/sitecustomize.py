"""Python process accounting for `make test-timings` (scripts/dev/test_timings.py): with
TRAINBOOK_PY_ACCOUNT=DIR and this folder on PYTHONPATH, every Python process the tests start
(the PyTorch oracles, the launchers, the notebook runner) appends one JSON line to
DIR/PID.jsonl when it exits: its script, wall and CPU seconds, whether it had torch loaded and
whether it was a child of the oracle server (which imported torch for it).
A process that ends by a signal or os._exit writes nothing. Off (nothing imported, nothing
written) without TRAINBOOK_PY_ACCOUNT."""
import os

if os.environ.get("TRAINBOOK_PY_ACCOUNT"):
    import atexit
    import json
    import resource
    import sys
    import time

    _start = time.monotonic()

    def _record():
        usage = resource.getrusage(resource.RUSAGE_SELF)
        line = {
            "script": os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "-",
            "wall_s": round(time.monotonic() - _start, 3),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
            "torch": "torch" in sys.modules,
            # A child of the oracle server (scripts/dev/oracle_server.py): torch was imported
            # once, by the server, not by this process.
            "forked": getattr(sys, "_trainbook_oracle_fork", False),
            "torchvision": "torchvision" in sys.modules,
        }
        try:
            directory = os.environ["TRAINBOOK_PY_ACCOUNT"]
            os.makedirs(directory, exist_ok=True)
            with open(os.path.join(directory, f"{os.getpid()}.jsonl"), "a") as f:
                f.write(json.dumps(line) + "\n")
        except OSError:
            pass

    atexit.register(_record)
