"""What a launch gives back to its caller: per-epoch reports as they happen and a result at the
end, built from the report lines a trainbook program prints under a launcher (TRAINBOOK_REPORT,
src/launch/protocol.rs).

The counterparts: Ray Train's `ray.train.report(metrics)` (here: `on_report(metrics)` is called
on the driver when rank 0 finishes an epoch) and the `Result` that `TorchTrainer.fit()`
returns (`metrics`, `metrics_history` in place of `metrics_dataframe`, `checkpoint`, `path`,
`error`); for Dask, what each rank's future returned (`ranks`).
"""
import dataclasses
import json
import threading

from launch_common import describe_report, log


@dataclasses.dataclass
class Result:
    """The outcome of a launched trainbook job.

    metrics          rank 0's last epoch report (dict: epoch, train_loss, train_acc, val_loss,
                     val_acc, lr, img_per_s, ..., checkpoint, best_checkpoint), None if no
                     epoch finished
    metrics_history  rank 0's report of every epoch, in epoch order (after a restart, an
                     epoch's newest report)
    checkpoint       the newest step checkpoint's directory (as the ranks see it), or None
    best_checkpoint  the best-accuracy checkpoint's directory, or None
    path             the run's output folder (metrics.jsonl, curves.png, model.safetensors)
    error            why the job failed ("rank 1 was killed by SIGKILL"), None on success
    returncode       the launcher's exit status (0 on success)
    attempts         how many times the group was started
    ranks            per rank (index = rank), what its last attempt returned: status, the tail
                     of its output, its epoch reports and its final report
    """

    metrics: dict = None
    metrics_history: list = dataclasses.field(default_factory=list)
    checkpoint: str = None
    best_checkpoint: str = None
    path: str = None
    error: str = None
    returncode: int = 0
    attempts: int = 0
    ranks: list = dataclasses.field(default_factory=list)

    @property
    def ok(self):
        return self.returncode == 0

    def to_json(self):
        return json.dumps(dataclasses.asdict(self), indent=1)

    def summary(self):
        """A few lines for a person: the outcome, one line per epoch, the checkpoints."""
        lines = [f"Result: {'finished' if self.ok else 'failed: ' + str(self.error)} after {self.attempts} attempt(s)"]
        lines += [f"  {describe_report(m)}" for m in self.metrics_history]
        lines.append(f"  output {self.path}; newest checkpoint {self.checkpoint}; best {self.best_checkpoint}")
        return "\n".join(lines)


class Collector:
    """Gathers report lines on the driver while a job runs (thread-safe): rank 0's epoch
    reports (passed on to `on_report` as they arrive) and every rank's outcome."""

    def __init__(self, on_report=None):
        self.on_report = on_report
        self.lock = threading.Lock()
        self.history = {}
        self.final = None
        self.ranks = {}

    def rank0_report(self, report):
        with self.lock:
            self.history[report.get("epoch")] = report
        if self.on_report is not None:
            self.on_report(report)

    def rank0_result(self, result):
        with self.lock:
            self.final = result

    def rank_outcome(self, rank, outcome):
        """`outcome`: a dict from launch_common.pump (status, tail, reports, result)."""
        with self.lock:
            self.ranks[rank] = outcome

    def new_attempt(self):
        with self.lock:
            self.ranks = {}
            self.final = None

    def result(self, returncode, attempts, error):
        with self.lock:
            history = [self.history[k] for k in sorted(self.history, key=lambda e: (e is None, e))]
            final = self.final or {}
            last = history[-1] if history else {}
            return Result(
                metrics=history[-1] if history else None,
                metrics_history=history,
                checkpoint=final.get("checkpoint", last.get("checkpoint")),
                best_checkpoint=final.get("best_checkpoint", last.get("best_checkpoint")),
                path=final.get("out"),
                error=error,
                returncode=returncode,
                attempts=attempts,
                ranks=[self.ranks[r] for r in sorted(self.ranks)],
            )


def run_cli(name, run, args):
    """A launcher's command line: `run(args, on_report)` with each report logged as it comes,
    then the result's summary logged and, with `--result-json PATH`, the result saved as JSON
    (for scripts that start the launcher). Returns the exit status."""

    def show(metrics):
        log(f"{name}: report {describe_report(metrics)}")

    result = run(args, show)
    log(result.summary())
    if args.result_json:
        with open(args.result_json, "w") as f:
            f.write(result.to_json())
    return result.returncode
