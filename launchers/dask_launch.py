#!/usr/bin/env python3
"""Run a trainbook program as N data-parallel ranks on a Dask cluster, one rank per worker.

The counterpart of `dask_pytorch_ddp.dispatch.run(client, fn)` for a native program: it picks
N workers, takes MASTER_ADDR from the first worker's host and asks that worker for a free port
on its host, then submits exactly one task pinned to each worker (never `map`: two ranks on one
worker would share its threads and its GPU). Each task runs the program with the variables
torchrun would set; rank 0's output is streamed here through Dask's event log, exit statuses
are gathered, and on a failure the other ranks are stopped and, with --max-failures, the whole
group starts again (a trainbook program resumes from its checkpoints).

Each rank's future returns what the rank reported (dispatch.run's futures give back what each
worker's function returned): its exit status, the tail of its output, one report per finished
epoch and its final report; rank 0's reports also arrive on the driver as they happen. From
Python:

    from dask_launch import launch
    result = launch(["target/release/examples/dogs", "--epochs", "3"], num_workers=2, local_workers=2)
    for r in result.ranks: print(r["status"], r["result"]["best_val_acc"])

From the command line it prints each report and the result, and `--result-json FILE` saves it.

    python launchers/dask_launch.py --local-workers 2 --num-workers 2 -- target/release/examples/mnist
    python launchers/dask_launch.py --scheduler tcp://head:8786 --num-workers 4 -- /shared/bin/designsafe

The program's path must exist on every worker's host (a shared file system, or the same image).
"""
import argparse
import os
import sys
import threading
import urllib.parse

import cloudpickle
from distributed import Client, LocalCluster, as_completed, get_worker

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch_common as common  # noqa: E402
from launch_results import Collector, run_cli  # noqa: E402

cloudpickle.register_pickle_by_value(common)


def run_rank_task(cmd, env, cwd, job, stream_topic):
    """The task on one worker: runs the rank, publishing its lines to `stream_topic` if given.
    The process is parked on the worker object so that `stop_job` (run out of band with
    `client.run`) can reach it while this task is busy."""
    worker = get_worker()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    if "," in visible and "CUDA_VISIBLE_DEVICES" not in env:
        # dask-cuda starts worker i with its own GPU listed first ("i,i+1,...,0,...,i-1"): the
        # rank keeps just that one, so LOCAL_RANK cannot pick a GPU that another worker owns.
        env = dict(env, CUDA_VISIBLE_DEVICES=visible.split(",")[0])
    # Dask's nanny gives its workers MALLOC_TRIM_THRESHOLD_=65536 (distributed.nanny.pre-spawn-
    # environ) to keep a worker's own memory low. Inherited by a training process it makes glibc
    # hand memory back to the OS after every large free: a ResNet50 rank here ran at 22 img/s
    # with it and 38 without. Ranks get glibc's default unless --env sets the variable.
    unset = () if "MALLOC_TRIM_THRESHOLD_" in env else ("MALLOC_TRIM_THRESHOLD_",)
    proc = common.start_rank(cmd, env, cwd, unset)
    procs = getattr(worker, "_trainbook_ranks", None)
    if procs is None:
        procs = worker._trainbook_ranks = {}
    procs[job] = proc
    try:
        on_line = (lambda line: worker.log_event(stream_topic, line)) if stream_topic else None
        return common.pump(proc, on_line)
    finally:
        procs.pop(job, None)
        if stream_topic:
            worker.log_event(stream_topic, END_OF_STREAM)


END_OF_STREAM = "\x00trainbook: end of stream\x00"


def stop_job(job, dask_worker=None):
    proc = getattr(dask_worker, "_trainbook_ranks", {}).get(job)
    common.stop_rank(proc)


def host_of(address):
    return urllib.parse.urlparse(address).hostname


def pick_workers(client, n, wait):
    """The first n workers, those on one host next to each other (so local ranks are contiguous)."""
    try:
        client.wait_for_workers(n, timeout=wait)
    except TimeoutError:
        pass
    workers = list(client.scheduler_info(n_workers=-1)["workers"])
    if len(workers) < n:
        raise SystemExit(
            f"dask_launch: the cluster has {len(workers)} worker(s) but {n} ranks were asked for "
            f"(waited {wait:.0f} s); each rank needs a worker of its own: add workers or lower --num-workers"
        )
    first_seen = {}
    for w in workers:
        first_seen.setdefault(host_of(w), len(first_seen))
    return sorted(workers, key=lambda w: (first_seen[host_of(w)], w))[:n]


def run_group(client, args, attempt, collector):
    collector.new_attempt()
    workers = pick_workers(client, args.num_workers, args.wait_for_workers)
    hosts = [host_of(w) for w in workers]
    master_addr = hosts[0]
    master_port = client.run(common.free_port, workers=[workers[0]])[workers[0]]
    job = common.job_id()
    topic = f"trainbook-{job}-rank0"
    streamed = threading.Event()

    def show(event):
        line = event[1]
        if line == END_OF_STREAM:
            streamed.set()
            return
        parsed = common.parse_report(line)
        if parsed is None:
            sys.stdout.write(line)
            sys.stdout.flush()
        elif parsed[0] == "report":
            collector.rank0_report(parsed[1])
        else:
            collector.rank0_result(parsed[1])

    client.subscribe_topic(topic, show)
    extra = common.parse_env_pairs(args.env)
    common.log(f"dask_launch: {len(workers)} ranks on {len(set(hosts))} host(s), master {master_addr}:{master_port}")
    futures = {}
    for rank, (worker, (local_rank, local_world)) in enumerate(zip(workers, common.local_layout(hosts))):
        env = common.rank_env(rank, len(workers), local_rank, local_world, master_addr, master_port, "dask", attempt, extra)
        fut = client.submit(
            run_rank_task,
            args.command,
            env,
            args.cwd,
            job,
            topic if rank == 0 else None,
            key=f"trainbook-rank{rank}-{job}",
            workers=[worker],
            allow_other_workers=False,
            resources=args.resources or None,
            pure=False,
        )
        futures[fut] = rank
    failures, stopped = [], False
    for fut in as_completed(list(futures)):
        rank = futures[fut]
        try:
            outcome = fut.result()
        except Exception as e:  # the worker died or the task could not run
            outcome = {"status": None, "tail": f"{type(e).__name__}: {e}", "reports": [], "result": None}
        collector.rank_outcome(rank, outcome)
        status, tail = outcome["status"], outcome["tail"]
        if status != 0:
            failures.append((rank, status, tail))
            if not stopped:
                stopped = True
                try:
                    client.run(stop_job, job, workers=workers, on_error="ignore")
                except Exception:  # noqa: BLE001 - a dead worker's rank is gone already
                    pass
    streamed.wait(10)  # rank 0's last lines may still be on their way
    client.unsubscribe_topic(topic)
    return failures


def parse_args(argv):
    p = common.new_parser(__doc__, "one per Dask worker")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--scheduler", help="address of a running Dask scheduler (default: DASK_SCHEDULER_ADDRESS)")
    where.add_argument("--local-workers", type=int, help="start a LocalCluster of this many worker processes")
    p.add_argument("--resources", type=resource_spec, default={},
                   help="worker resources each rank needs, e.g. GPU=1 (workers started with --resources GPU=1)")
    p.add_argument("--wait-for-workers", type=float, default=30.0, help="seconds to wait for enough workers (default 30)")
    p.add_argument("--result-json", metavar="FILE", help="write the job's result (every rank's reports) to FILE as JSON")
    return common.parse_launch_args(p, argv, "dask_launch.py")


def resource_spec(text):
    """`GPU=1,MEM=2e9` -> {"GPU": 1.0, "MEM": 2e9}"""
    try:
        return {k.strip(): float(v) for k, v in (item.split("=") for item in text.split(",") if item)}
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=AMOUNT[,NAME=AMOUNT...]")


def run(args, on_report=None, client=None):
    """Runs the parsed job to its end on `client` (or the cluster the options name); returns
    its Result, whose `ranks` hold what each rank's future returned."""
    collector = Collector(on_report)
    if client is not None:
        outcome = common.run_with_retries(lambda attempt: run_group(client, args, attempt, collector), args.max_failures, "dask_launch")
        return collector.result(*outcome)
    cluster = None
    if args.local_workers is not None:
        cluster = LocalCluster(n_workers=args.local_workers, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
    else:
        address = args.scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS")
        if not address:
            raise SystemExit("dask_launch: give --scheduler ADDRESS (or DASK_SCHEDULER_ADDRESS), or --local-workers N")
        client = Client(address)
    try:
        outcome = common.run_with_retries(lambda attempt: run_group(client, args, attempt, collector), args.max_failures, "dask_launch")
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    return collector.result(*outcome)


def launch(command, num_workers, on_report=None, client=None, **options):
    """Runs `command` (a list: program and arguments) as `num_workers` ranks, one per Dask
    worker, and returns the Result; `on_report(metrics)` is called on every epoch rank 0
    finishes. Give a `client` of your own (`distributed.Client`) or the options as keywords
    (local_workers=2, scheduler="tcp://head:8786", resources="GPU=1", max_failures=1, ...)."""
    argv = common.options_to_argv(dict(options, num_workers=num_workers)) + ["--", *map(str, command)]
    return run(parse_args(argv), on_report, client)


def main(argv=None):
    return run_cli("dask_launch", run, parse_args(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
