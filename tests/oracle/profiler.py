"""torch.profiler.schedule's actions, for tests/training/profiler.rs: for each
(wait, warmup, active, repeat, skip_first) given as JSON on argv[1], the action names of steps
0..N-1 (N = argv[2])."""
import json
import sys
import warnings

from torch.profiler import schedule

warnings.simplefilter("ignore")  # warmup=0 warns; the actions are what is compared
combos, steps = json.loads(sys.argv[1]), int(sys.argv[2])
out = []
for wait, warmup, active, repeat, skip_first in combos:
    fn = schedule(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first)
    out.append([fn(step).name for step in range(steps)])
print(json.dumps(out))
