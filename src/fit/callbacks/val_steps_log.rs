//! `OUT/val_steps.jsonl` as a callback: rank 0 appends one JSON line per mid-epoch validation
//! ([`Trainer::val_every_steps`](crate::fit::Trainer::val_every_steps)): the epoch (0-based),
//! the optimizer step, `val_loss`, `val_acc` (classification) and the run's own metrics as
//! `val_<name>`. A resumed run keeps the lines up to its checkpoint's step and drops those the
//! interrupted run wrote after it (it takes those steps again); a new run starts the file anew.
use std::io::Write;
use std::path::PathBuf;

use crate::fit::callbacks::{Callback, FitStart};
use crate::train::{EpochSummary, Task};
use crate::{Result, WithPath};

/// The file name of the mid-epoch validations' log in a run's output folder.
pub(crate) const VAL_STEPS_LOG: &str = "val_steps.jsonl";

/// Writes `val_steps.jsonl` (rank 0 only).
#[derive(Default)]
pub(crate) struct ValStepsLog {
    path: Option<PathBuf>,
}

/// The line of a validation after step `step` of epoch `epoch`.
pub(crate) fn line(epoch: u64, step: u64, v: &EpochSummary) -> serde_json::Value {
    let mut line = serde_json::json!({ "epoch": epoch, "step": step, "val_loss": v.loss });
    if v.task != Task::Regression {
        line["val_acc"] = v.accuracy.into();
    }
    for (key, value) in crate::train::own_metric_keys("val", v) {
        line[key] = value;
    }
    line
}

impl Callback for ValStepsLog {
    fn on_fit_start(&mut self, start: &FitStart) -> Result<()> {
        if start.rank != 0 {
            return Ok(());
        }
        std::fs::create_dir_all(start.out).with_path(start.out)?;
        let path = start.out.join(VAL_STEPS_LOG);
        let kept: Vec<String> = match std::fs::read_to_string(&path) {
            Ok(text) if start.resumed => text
                .lines()
                .filter(|l| {
                    let step = serde_json::from_str::<serde_json::Value>(l)
                        .ok()
                        .and_then(|v| v["step"].as_u64());
                    step.is_some_and(|s| s <= start.steps_done)
                })
                .map(|l| format!("{l}\n"))
                .collect(),
            _ => Vec::new(),
        };
        std::fs::write(&path, kept.concat()).with_path(&path)?;
        self.path = Some(path);
        Ok(())
    }

    fn on_step_validation(
        &mut self,
        epoch: u64,
        steps_done: u64,
        val: &EpochSummary,
    ) -> Result<()> {
        let Some(path) = &self.path else { return Ok(()) };
        let mut file = std::fs::OpenOptions::new().append(true).open(path).with_path(path)?;
        writeln!(file, "{}", line(epoch, steps_done, val)).with_path(path)
    }
}
