//! Writing the report lines for a launcher: when [`REPORT_ENV`] is set (trainbook's Ray and Dask
//! launchers set it), every rank of a [`Trainer`](crate::fit::Trainer) run prints one
//! machine-readable line per epoch and one when the run ends, which the launcher turns into
//! per-epoch reports and a result for its caller: the counterpart of Ray Train's
//! `ray.train.report(metrics)` and of the `Result` that `TorchTrainer.fit()` returns, and of a
//! Dask future's return value. The format (prefixes, fields) is defined with its reader in
//! [`crate::launch::protocol`]. Without the variable nothing is printed.
use std::io::Write;
use std::path::Path;

use serde_json::{json, Value};

use crate::checkpoint::Checkpointer;
use crate::fit::outcome::FitReport;
use crate::train::EpochRecord;

use crate::launch::protocol::{EPOCH_PREFIX, REPORT_ENV, RESULT_PREFIX};

/// Whether [`REPORT_ENV`] asks for report lines.
pub fn reports_enabled() -> bool {
    std::env::var(REPORT_ENV).is_ok_and(|v| !v.is_empty() && v != "0")
}

fn path_value(path: Option<&Path>) -> Value {
    path.map_or(Value::Null, |p| Value::String(p.display().to_string()))
}

/// The checkpoints a launcher's caller may want: the newest `step-*` and `best/`.
fn checkpoints(ckpt: &Checkpointer) -> (Value, Value) {
    (path_value(ckpt.last_saved().as_deref()), path_value(ckpt.best_dir().as_deref()))
}

fn emit(prefix: &str, object: Value) {
    let mut out = std::io::stdout().lock();
    // A closed stdout must not end training; the report is lost with it.
    let _ = writeln!(out, "{prefix}{object}");
    let _ = out.flush();
}

/// Prints the report line of a finished epoch (when reports are on).
pub(crate) fn epoch_done(rank: usize, record: &EpochRecord, ckpt: &Checkpointer) {
    if !reports_enabled() {
        return;
    }
    let mut object = serde_json::to_value(record).unwrap_or_else(|_| json!({}));
    let (checkpoint, best) = checkpoints(ckpt);
    if let Value::Object(map) = &mut object {
        map.insert("rank".into(), json!(rank));
        map.insert("checkpoint".into(), checkpoint);
        map.insert("best_checkpoint".into(), best);
    }
    emit(EPOCH_PREFIX, object);
}

/// Prints the result line of a run that ended without an error (when reports are on).
pub(crate) fn run_done(rank: usize, out: &Path, report: &FitReport, ckpt: &Checkpointer) {
    if !reports_enabled() {
        return;
    }
    let (checkpoint, best) = checkpoints(ckpt);
    let last = report.last();
    emit(
        RESULT_PREFIX,
        json!({
            "rank": rank,
            "out": out.display().to_string(),
            "epochs_done": last.map_or(0, |r| r.epoch + 1),
            "best_val_acc": report.best_val_acc,
            "last": last,
            "checkpoint": checkpoint,
            "best_checkpoint": best,
            "model": path_value(Some(&out.join("model.safetensors"))),
            "interrupted": report.interrupted.as_ref().map(|i| i.reason.to_string()),
            "resumed_from": report.resumed_from.as_ref().map(|(dir, _, _)| dir.display().to_string()),
        }),
    );
}
