//! The launcher wire format, writer and reader in one place: when [`REPORT_ENV`] is set
//! (trainbook's Ray and Dask launchers set it), every rank of a
//! [`Trainer`](crate::fit::Trainer) run prints one line per finished epoch and one when the run
//! ends (fit's launcher report writes them); the launchers (launchers/launch_common.py's
//! `REPORT_PREFIXES`) turn them into per-epoch reports and a result, which
//! [`LaunchResult`](super::LaunchResult) reads back as [`EpochReport`]s and [`RunReport`]s.
//!
//! ```text
//! trainbook-report {"rank":0,"epoch":0,"train_loss":2.1,...,"checkpoint":"runs/x/checkpoints/step-000000050"}
//! trainbook-result {"rank":0,"out":"runs/x","epochs_done":3,"best_val_acc":0.61,...}
//! ```
//!
//! Each line is one JSON object after the prefix: an epoch's [`EpochRecord`] fields plus
//! `rank` and the checkpoints written so far, and at the end the run's outcome.
use std::path::PathBuf;

use serde::Deserialize;

use crate::train::EpochRecord;

/// The environment variable that turns the report lines on (any non-empty value but `0`).
pub const REPORT_ENV: &str = "TRAINBOOK_REPORT";
/// The prefix of a per-epoch report line.
pub const EPOCH_PREFIX: &str = "trainbook-report ";
/// The prefix of the line that ends a run.
pub const RESULT_PREFIX: &str = "trainbook-result ";

/// One epoch as a rank reported it: the metrics log's record plus where the checkpoints were.
#[derive(Clone, Debug, Deserialize)]
pub struct EpochReport {
    /// The epoch's metrics, as in metrics.jsonl.
    #[serde(flatten)]
    pub record: EpochRecord,
    /// The rank that reported it.
    #[serde(default)]
    pub rank: usize,
    /// The newest step checkpoint at the end of the epoch.
    pub checkpoint: Option<PathBuf>,
    /// The best-accuracy checkpoint at the end of the epoch.
    pub best_checkpoint: Option<PathBuf>,
}

/// What a rank's run reported when it ended.
#[derive(Clone, Debug, Deserialize)]
pub struct RunReport {
    /// The run's output folder.
    pub out: PathBuf,
    /// Epochs done (earlier runs it resumed from included).
    pub epochs_done: u64,
    /// The best validation accuracy seen.
    pub best_val_acc: Option<f64>,
    /// The final weights (written by rank 0).
    pub model: Option<PathBuf>,
    /// Set when the run was stopped early: why.
    pub interrupted: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::{EPOCH_PREFIX, REPORT_ENV, RESULT_PREFIX};

    #[test]
    fn the_python_launchers_read_the_same_prefixes() {
        let common = include_str!("../../launchers/launch_common.py");
        for needle in [
            format!("{EPOCH_PREFIX:?}: \"report\""),
            format!("{RESULT_PREFIX:?}: \"result\""),
            format!("{REPORT_ENV:?}: \"1\""),
        ] {
            assert!(common.contains(&needle), "launchers/launch_common.py lacks {needle}");
        }
    }
}
