"""What trainbook's Ray and Dask launchers share: the rank environment a trainbook program
reads (the same variables torchrun sets), running one rank's process, and the retry loop.

Functions here run on cluster workers too; the launchers register this module to be pickled by
value, so workers do not need it on their path.
"""
import argparse
import collections
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid

TAIL_LINES = 40

# The lines a trainbook program prints when TRAINBOOK_REPORT is set (src/launch/protocol.rs): one JSON
# object per finished epoch, and one when the run ends.
REPORT_PREFIXES = {"trainbook-report ": "report", "trainbook-result ": "result"}


def free_port():
    """A TCP port that is free on this host right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def local_layout(hosts):
    """For each rank's host, its (local_rank, local_world_size): ranks are numbered per host in
    rank order, like torchrun's LOCAL_RANK."""
    counts = collections.Counter(hosts)
    seen = collections.Counter()
    layout = []
    for host in hosts:
        layout.append((seen[host], counts[host]))
        seen[host] += 1
    return layout


def rank_env(rank, world_size, local_rank, local_world_size, master_addr, master_port, launcher, attempt, extra=None):
    """The variables a trainbook program's `Dist::init()` reads, as torchrun would set them."""
    env = {
        "RANK": str(rank),
        "WORLD_SIZE": str(world_size),
        "LOCAL_RANK": str(local_rank),
        "LOCAL_WORLD_SIZE": str(local_world_size),
        "MASTER_ADDR": str(master_addr),
        "MASTER_PORT": str(master_port),
        "TRAINBOOK_LAUNCHER": launcher,
        "TRAINBOOK_RESTART_COUNT": str(attempt),
        "TRAINBOOK_REPORT": "1",
    }
    env.update(extra or {})
    return env


def new_parser(doc, worker_help):
    """The options both launchers share; each adds its own cluster options."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--num-workers", type=int, required=True, help=f"ranks to run ({worker_help})")
    p.add_argument("--max-failures", type=int, default=0, help="restart the whole group up to N times after a failure")
    p.add_argument("--env", action="append", metavar="KEY=VALUE", help="extra environment for every rank")
    p.add_argument("--cwd", default=os.getcwd(), help="working directory of the ranks (default: this one)")
    return p


def parse_launch_args(p, argv, script):
    """Parses `[options] -- program [args...]`; the program path is made absolute if it exists
    here (ranks may start in another directory)."""
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- program [args...]")
    args = p.parse_args(argv)
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not args.command:
        p.error(f"no program given: {script} [options] -- program [args...]")
    if args.num_workers < 1:
        p.error("--num-workers must be at least 1")
    if args.max_failures < 0:
        p.error("--max-failures must be 0 or more")
    parse_env_pairs(args.env)
    if os.path.exists(args.command[0]):
        args.command[0] = os.path.abspath(args.command[0])
    return args


def options_to_argv(options):
    """Keyword options as command-line options: `use_gpu=True` -> `--use-gpu`, `env=[...]` ->
    one `--env` each, dicts as JSON; None and False are left out."""
    argv = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            argv.append(flag)
        elif isinstance(value, (list, tuple)):
            for v in value:
                argv += [flag, str(v)]
        elif isinstance(value, dict):
            argv += [flag, json.dumps(value)]
        else:
            argv += [flag, str(value)]
    return argv


def describe_report(m):
    """One epoch report in a line."""
    nan = float("nan")
    text = f"epoch {m.get('epoch', -1) + 1}: train loss {m.get('train_loss', nan):.4f}, acc {100 * m.get('train_acc', nan):.2f}%"
    if m.get("val_loss") is not None:
        text += f" | val loss {m['val_loss']:.4f}, acc {100 * m.get('val_acc', nan):.2f}%"
    return text


def parse_env_pairs(pairs):
    """`--env KEY=VALUE` options as a dict."""
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"--env {pair!r}: expected KEY=VALUE")
        out[key] = value
    return out


def _die_with_parent():
    """In the child before exec: get SIGKILL when the worker that started us dies, so a killed
    Ray actor or Dask worker never leaves an orphan rank behind."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


# Set in a Ray node's processes started with a raised priority (ray_launch.node_processes_first):
# by how many nice levels. A rank gives them back.
NODE_BOOST_ENV = "TRAINBOOK_RAY_NODE_BOOST"


def _rank_preexec():
    """In the child before exec: dies with its parent (_die_with_parent), and gives back the
    nice levels the node's processes were raised by, so the rank runs at the priority it would
    have had without them."""
    _die_with_parent()
    try:
        boost = int(os.environ.get(NODE_BOOST_ENV, "0"))
    except ValueError:
        boost = 0
    if boost > 0:
        os.nice(boost)


def start_rank(cmd, env, cwd=None, unset=()):
    """Starts one rank: stdout and stderr merged into one line-buffered pipe. The rank gets this
    process's environment without the variables in `unset`, plus `env`."""
    full_env = {k: v for k, v in os.environ.items() if k not in unset}
    full_env.update(env)
    return subprocess.Popen(
        cmd,
        env=full_env,
        cwd=cwd or None,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        bufsize=1,
        start_new_session=True,  # its own process group: stop_rank() reaches its children too
        preexec_fn=_rank_preexec,
    )


def parse_report(line):
    """`("report" | "result", dict)` for a report line of a trainbook program, else None (an
    ordinary line, or a report line whose JSON is damaged)."""
    for prefix, kind in REPORT_PREFIXES.items():
        if line.startswith(prefix):
            try:
                return kind, json.loads(line[len(prefix):])
            except ValueError:
                return None
    return None


def pump(proc, on_line=None):
    """Reads the rank's output to the end (passing each line to `on_line`, report lines
    included) and waits for it. Returns the rank's outcome as a dict: `status` (exit status),
    `tail` (its last lines of ordinary output), `reports` (one dict per epoch) and `result`
    (the run's final report, None if it printed none)."""
    tail = collections.deque(maxlen=TAIL_LINES)
    reports, result = [], None
    for line in proc.stdout:
        parsed = parse_report(line)
        if parsed is None:
            tail.append(line)
        elif parsed[0] == "report":
            reports.append(parsed[1])
        else:
            result = parsed[1]
        if on_line is not None:
            on_line(line)
    return {"status": proc.wait(), "tail": "".join(tail), "reports": reports, "result": result}


def stop_rank(proc, grace=5.0):
    """SIGTERM to the rank's process group, then SIGKILL after `grace` seconds."""
    if proc is None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(grace)
            return
        except subprocess.TimeoutExpired:
            continue


def describe_status(code):
    if code is None:
        return "did not report (its worker died)"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}"
    return f"exited with code {code}"


def exit_code(code):
    """A shell-style exit status for a rank's status (128+N for signal N; 1 when unknown)."""
    if code is None:
        return 1
    return 128 - code if code < 0 else code


def job_id():
    return uuid.uuid4().hex[:12]


def run_with_retries(run_group, max_failures, name):
    """Runs `run_group(attempt)` until it succeeds or `max_failures` retries are spent, as Ray
    Train's FailureConfig(max_failures) does: the whole group restarts, and the program resumes
    from its own checkpoints. `run_group` returns a list of (rank, status, tail) for failed
    ranks (empty on success). Returns (exit code for the launcher, attempts made, a one-line
    description of the first failure of the last attempt or None)."""
    attempts = max_failures + 1
    for attempt in range(attempts):
        start = time.monotonic()
        failures = run_group(attempt)
        took = time.monotonic() - start
        if not failures:
            log(f"{name}: all ranks finished (attempt {attempt + 1}/{attempts}, {took:.1f} s)")
            return 0, attempt + 1, None
        first = failures[0]
        error = f"rank {first[0]} {describe_status(first[1])}"
        log(f"{name}: attempt {attempt + 1}/{attempts} failed after {took:.1f} s: {error}")
        for rank, status, tail in failures:
            if tail.strip():
                log(f"--- last output of rank {rank} ({describe_status(status)}) ---\n{tail.rstrip()}")
        if attempt + 1 < attempts:
            log(f"{name}: restarting the whole group (attempt {attempt + 2}/{attempts}); trainbook programs resume from their checkpoints")
    return exit_code(first[1]), attempts, error


def log(message):
    print(message, file=sys.stderr, flush=True)
