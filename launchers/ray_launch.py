#!/usr/bin/env python3
"""Run a trainbook program as N data-parallel ranks on a Ray cluster.

The Ray counterpart of `torchrun --no-python`, shaped like Ray Train's
`TorchTrainer(scaling_config=ScalingConfig(num_workers, use_gpu, resources_per_worker))`:
it reserves one bundle of resources per rank (a placement group, PACK by default), starts one
actor per bundle, takes MASTER_ADDR from rank 0's node and a free port there, and runs the
program in every actor with the variables torchrun would set (RANK, LOCAL_RANK, WORLD_SIZE,
LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT). Rank 0's output is streamed here; when a rank
fails the others are stopped, and with --max-failures the whole group is started again (a
trainbook program resumes from its checkpoints). Exits with the job's status.

Like `TorchTrainer.fit()`, it gives back a result: every epoch rank 0 finishes is reported as it
happens (`ray.train.report`'s counterpart) and the job's metrics, checkpoints and error come
back at the end. From Python:

    from ray_launch import launch
    result = launch(["target/release/examples/tiny_imagenet", "--epochs", "2"], num_workers=2,
                    on_report=lambda m: print("epoch", m["epoch"] + 1, m["val_loss"]))
    print(result.metrics["val_acc"], result.best_checkpoint)

From the command line it prints each report and the result, and `--result-json FILE` saves it.

    python launchers/ray_launch.py --num-workers 2 -- target/release/examples/mnist --epochs 1
    python launchers/ray_launch.py --address auto --num-workers 8 --use-gpu --max-failures 2 -- \\
        /shared/trainbook/target/release/examples/designsafe --data /shared/Dataset_2

The program's path must exist on every node (a shared file system, or the same image).
"""
import collections
import contextlib
import json
import os
import queue
import signal
import sys
import threading

import cloudpickle
import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch_common as common  # noqa: E402
from launch_results import Collector, run_cli  # noqa: E402

cloudpickle.register_pickle_by_value(common)


@ray.remote
class RankWorker:
    """One rank: knows its node and GPUs, runs the program, stops it on request."""

    def __init__(self):
        self.proc = None

    def node(self):
        return ray.util.get_node_ip_address(), [str(g) for g in ray.get_gpu_ids()]

    def free_port(self):
        return common.free_port()

    def run(self, cmd, env, cwd):
        self.proc = common.start_rank(cmd, env, cwd)
        return common.pump(self.proc)

    def run_streaming(self, cmd, env, cwd):
        """Like run(), yielding each output line, then the final (status, tail)."""
        self.proc = common.start_rank(cmd, env, cwd)
        for line in self.proc.stdout:
            yield line
        yield ("exit", self.proc.wait(), "")

    def stop(self):
        common.stop_rank(self.proc)


def parse_args(argv):
    p = common.new_parser(__doc__, "one actor each")
    p.add_argument("--use-gpu", action="store_true", help="one GPU per worker (ScalingConfig(use_gpu=True))")
    p.add_argument("--gpus-per-worker", type=float, help="GPUs per worker (default 1 with --use-gpu, else 0)")
    p.add_argument("--cpus-per-worker", type=float, default=1.0, help="CPUs per worker (default 1)")
    p.add_argument("--resources-per-worker", type=json.loads, default={}, help='extra custom resources, JSON: \'{"accel": 1}\'')
    p.add_argument("--placement-strategy", default="PACK", choices=["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"])
    p.add_argument("--address", default=None, help="Ray cluster to join ('auto', ray://host:10001); default: RAY_ADDRESS, else a local Ray")
    p.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local Ray started when no cluster is given")
    p.add_argument("--placement-timeout", type=float, default=120.0, help="seconds to wait for the resources (default 120)")
    p.add_argument("--result-json", metavar="FILE", help="write the job's result (metrics, checkpoints) to FILE as JSON")
    args = common.parse_launch_args(p, argv, "ray_launch.py")
    if args.gpus_per_worker is None:
        args.gpus_per_worker = 1.0 if args.use_gpu else 0.0
    return args


def bundle(args):
    b = {"CPU": args.cpus_per_worker, **args.resources_per_worker}
    if args.gpus_per_worker:
        b["GPU"] = args.gpus_per_worker
    return b


def start_group(args):
    """Reserves the resources and starts one actor per rank, ordered so that ranks on one node
    are contiguous and, with GPUs, local rank i owns the node's i-th visible GPU."""
    pg = placement_group([bundle(args)] * args.num_workers, strategy=args.placement_strategy)
    ready, _ = ray.wait([pg.ready()], timeout=args.placement_timeout)
    if not ready:
        remove_placement_group(pg)
        raise SystemExit(
            f"ray_launch: could not reserve {args.num_workers} x {bundle(args)} within {args.placement_timeout:.0f} s; "
            f"the cluster has {ray.cluster_resources()}"
        )
    actors = [
        RankWorker.options(
            num_cpus=args.cpus_per_worker,
            num_gpus=args.gpus_per_worker,
            resources=args.resources_per_worker,
            max_concurrency=2,  # run() and stop() at the same time
            scheduling_strategy=PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i),
        ).remote()
        for i in range(args.num_workers)
    ]
    nodes = ray.get([a.node.remote() for a in actors])
    first_seen = {ip: n for n, ip in reversed(list(enumerate(ip for ip, _ in nodes)))}
    order = sorted(range(len(actors)), key=lambda i: (first_seen[nodes[i][0]], [(len(g), g) for g in nodes[i][1]], i))
    return pg, [actors[i] for i in order], [nodes[i] for i in order]


def run_group(args, attempt, collector):
    collector.new_attempt()
    pg, actors, nodes = start_group(args)
    try:
        hosts = [ip for ip, _ in nodes]
        master_addr, master_port = hosts[0], ray.get(actors[0].free_port.remote())
        visible = {ip: sorted({g for h, gpus in nodes if h == ip for g in gpus}, key=lambda g: (len(g), g)) for ip in hosts}
        extra = common.parse_env_pairs(args.env)
        envs = []
        for rank, ((local_rank, local_world), ip) in enumerate(zip(common.local_layout(hosts), hosts)):
            env = common.rank_env(rank, len(actors), local_rank, local_world, master_addr, master_port, "ray", attempt, extra)
            if visible[ip]:
                env["CUDA_VISIBLE_DEVICES"] = ",".join(visible[ip])
            envs.append(env)
        common.log(f"ray_launch: {len(actors)} ranks on {len(set(hosts))} node(s), master {master_addr}:{master_port}")
        return supervise(args, actors, envs, collector)
    finally:
        for a in actors:
            ray.kill(a)
        remove_placement_group(pg)


def supervise(args, actors, envs, collector):
    """Runs every rank; streams rank 0 (its report lines go to `collector`); on the first
    failure stops the others. Returns the failed ranks as (rank, status, tail)."""
    results = queue.Queue()

    def stream_rank0():
        status, tail = None, collections.deque(maxlen=common.TAIL_LINES)
        reports, final = [], None
        try:
            for ref in actors[0].run_streaming.options(num_returns="streaming").remote(args.command, envs[0], args.cwd):
                item = ray.get(ref)
                if isinstance(item, tuple) and item and item[0] == "exit":
                    status = item[1]
                    continue
                parsed = common.parse_report(item)
                if parsed is None:
                    sys.stdout.write(item)
                    sys.stdout.flush()
                    tail.append(item)
                elif parsed[0] == "report":
                    reports.append(parsed[1])
                    collector.rank0_report(parsed[1])
                else:
                    final = parsed[1]
                    collector.rank0_result(final)
        except ray.exceptions.RayError as e:
            tail.append(f"{type(e).__name__}: {e}\n")
        collector.rank_outcome(0, {"status": status, "tail": "".join(tail), "reports": reports, "result": final})
        results.put((0, status, "".join(tail)))

    def wait_rank(rank, ref):
        try:
            outcome = ray.get(ref)
        except ray.exceptions.RayError as e:
            outcome = {"status": None, "tail": f"{type(e).__name__}: {e}", "reports": [], "result": None}
        collector.rank_outcome(rank, outcome)
        results.put((rank, outcome["status"], outcome["tail"]))

    threads = [threading.Thread(target=stream_rank0, daemon=True)]
    for rank in range(1, len(actors)):
        ref = actors[rank].run.remote(args.command, envs[rank], args.cwd)
        threads.append(threading.Thread(target=wait_rank, args=(rank, ref), daemon=True))
    for t in threads:
        t.start()
    failures, stopped = [], False
    for _ in actors:
        rank, status, tail = results.get()
        if status != 0:
            failures.append((rank, status, tail))
            if not stopped:
                stopped = True
                try:
                    ray.get([a.stop.remote() for a in actors], timeout=30)
                except ray.exceptions.RayError:
                    pass  # a dead actor's rank is gone already
    for t in threads:
        t.join(5)
    # The first failure is the cause; ranks stopped on its account come after it.
    return failures


# Ray gives a local node 30 s to start its raylet (ray/_private/node.py), then gives up with
# this message; on a machine busy with other work (a shared login node, 2 cores running tests)
# the start can take longer, so a local start is tried this many times (three were not enough
# once: notebook 05 in a fresh-clone `make test` on a slower 2-core machine, all three tries
# timed out while the other tests kept both cores busy).
LOCAL_START_TRIES = 5
LOCAL_START_TIMEOUT = "timed out during startup"


def descendants():
    """The PIDs of this process's children and theirs (from Linux's /proc; empty elsewhere)."""
    parent_of = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    # pid (comm) state ppid ...; comm may hold spaces and parentheses.
                    parent_of[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass  # gone meanwhile
    found, frontier = set(), {os.getpid()}
    while frontier:
        frontier = {pid for pid, ppid in parent_of.items() if ppid in frontier} - found
        found |= frontier
    return found


# Ray 2.60's raylet waits 15 s (a fixed limit in its node_manager.cc) for its dashboard agent, a
# Python process, to write its ports to files, then aborts; the agent needed 8 s on an idle 2-core
# machine here (importing its modules alone takes 5.6 s) and more than 15 s while tests kept both
# cores busy (its raylet.out: "Timed out waiting for file .../dashboard_agent_listen_port_...").
# Where this process may raise its priority (root), the node's own processes (GCS, raylet, agents,
# Ray's workers) start this many nice levels above it; the ranks give them back
# (launch_common.start_rank reads NODE_BOOST_ENV). Elsewhere nothing changes. (Under 8 busy
# processes on 2 cores here, one local start failed so and one took 49 s; raised, one took 32 s.)
NODE_PRIORITY_BOOST = 5

# Nice levels act only inside a session where Linux groups the scheduling by session
# (kernel.sched_autogroup_enabled = 1): the cores are shared between busy sessions first. A
# notebook's kernel is a session of its own (jupyter_client starts kernels in a new session), so
# beside four busy sessions of two spinning processes each, a local start here failed after
# 60 s ("Failed to get node info b'RPC error: Deadline Exceeded'", as notebook 05 did in CI
# beside three notebooks and a torchrun test); with this process's session raised by 10, 15 and
# 20 levels it started in 20.8, 16.2 and 19.3 s (18.6 s on the idle machine). Where allowed
# (root), the session is raised this much while the node starts, and set back after.
AUTOGROUP_BOOST = 15
AUTOGROUP = "/proc/self/autogroup"


def autogroup_nice():
    """This process's session's nice level under Linux's autogroup scheduling; None where the
    kernel has no autogroups."""
    try:
        with open(AUTOGROUP) as f:
            return int(f.read().split("nice")[1])  # "/autogroup-436 nice 0"
    except (OSError, ValueError, IndexError):
        return None


def set_autogroup_nice(level):
    """Sets this session's autogroup nice level; False where that is not allowed."""
    try:
        with open(AUTOGROUP, "w") as f:
            f.write(str(level))
        return True
    except OSError:
        return False


@contextlib.contextmanager
def node_processes_first():
    """While it is open, processes this thread starts get NODE_PRIORITY_BOOST nice levels above
    it, and NODE_BOOST_ENV says so to the ranks, and this session's autogroup is AUTOGROUP_BOOST
    levels higher; what cannot be raised stays as it was."""
    with contextlib.ExitStack() as undo:
        try:
            before = os.getpriority(os.PRIO_PROCESS, 0)
            os.setpriority(os.PRIO_PROCESS, 0, before - NODE_PRIORITY_BOOST)
        except (OSError, AttributeError):
            pass
        else:
            os.environ[common.NODE_BOOST_ENV] = str(NODE_PRIORITY_BOOST)
            undo.callback(os.environ.pop, common.NODE_BOOST_ENV, None)
            undo.callback(os.setpriority, os.PRIO_PROCESS, 0, before)
        group = autogroup_nice()
        if group is not None and set_autogroup_nice(max(group - AUTOGROUP_BOOST, -20)):
            undo.callback(set_autogroup_nice, group)
        yield


def start_local_ray(init, tries=LOCAL_START_TRIES):
    """ray.init(**init) for a node of our own (its processes first where that is allowed: see
    NODE_PRIORITY_BOOST), again after Ray's start-up timeout: the processes the failed try
    started (its GCS and raylet, children of this process) are killed first."""
    for attempt in range(1, tries + 1):
        before = descendants()
        try:
            with node_processes_first():
                ray.init(**init)
            return
        except Exception as e:  # Ray raises a bare Exception for this
            if LOCAL_START_TIMEOUT not in str(e) or attempt == tries:
                raise
            for pid in descendants() - before:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass  # gone meanwhile
            ray.shutdown()
            print(f"ray_launch: the local Ray node did not start in time ({e}); starting it again "
                  f"(try {attempt + 1} of {tries})", file=sys.stderr, flush=True)


def run(args, on_report=None):
    """Runs the parsed job to its end; returns its Result."""
    init = {"address": args.address, "include_dashboard": False, "log_to_driver": False}
    local = args.address is None and not os.environ.get("RAY_ADDRESS")
    if local and args.num_cpus is not None:
        init["num_cpus"] = args.num_cpus
    started_ray = not ray.is_initialized()
    if started_ray and local:
        start_local_ray(init)
    elif started_ray:
        ray.init(**init)
    collector = Collector(on_report)
    try:
        outcome = common.run_with_retries(lambda attempt: run_group(args, attempt, collector), args.max_failures, "ray_launch")
    finally:
        if started_ray:
            ray.shutdown()
    return collector.result(*outcome)


def launch(command, num_workers, on_report=None, **options):
    """Runs `command` (a list: program and arguments) as `num_workers` ranks and returns the
    Result; `on_report(metrics)` is called on every epoch rank 0 finishes. `options` are the
    command-line options as keywords (use_gpu=True, cpus_per_worker=2, max_failures=1,
    address="auto", env=["KEY=VALUE"], ...). A Ray already initialised in this process is
    used as it is; otherwise one is started (and shut down) per the options."""
    argv = common.options_to_argv(dict(options, num_workers=num_workers)) + ["--", *map(str, command)]
    return run(parse_args(argv), on_report)


def main(argv=None):
    return run_cli("ray_launch", run, parse_args(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
