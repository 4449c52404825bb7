//! What a Ray or Dask job hands back (`--result-json`): [`LaunchResult`], the counterpart of Ray
//! Train's `Result` and of the futures of `dask_pytorch_ddp.dispatch.run`, with each rank's
//! [`RankOutcome`].
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::protocol::{EpochReport, RunReport};
use crate::train::EpochRecord;
use crate::{Error, Result, WithPath};

/// What one rank of a launch returned (for Dask, its future's value).
#[derive(Clone, Debug, Deserialize)]
pub struct RankOutcome {
    /// Exit status (`None`: its worker died before it reported).
    pub status: Option<i32>,
    /// The last lines of its output.
    pub tail: String,
    /// One report per epoch it finished.
    pub reports: Vec<EpochReport>,
    /// Its final report, if it got that far.
    pub result: Option<RunReport>,
}

/// The result a launcher wrote with `--result-json` (launchers/launch_results.py's `Result`).
#[derive(Clone, Debug, Deserialize)]
pub struct LaunchResult {
    /// Rank 0's last epoch report.
    pub metrics: Option<EpochReport>,
    /// Rank 0's report of every epoch, in order.
    pub metrics_history: Vec<EpochReport>,
    /// The newest step checkpoint.
    pub checkpoint: Option<PathBuf>,
    /// The best-accuracy checkpoint.
    pub best_checkpoint: Option<PathBuf>,
    /// The run's output folder.
    pub path: Option<PathBuf>,
    /// Why the job failed, `None` on success.
    pub error: Option<String>,
    /// The launcher's exit status.
    pub returncode: i32,
    /// Times the group was started.
    pub attempts: u32,
    /// Every rank's outcome (index = rank).
    pub ranks: Vec<RankOutcome>,
}

impl LaunchResult {
    /// Reads a `--result-json` file. Errors: [`Error::Io`] naming a missing file,
    /// [`Error::Parse`] for one that is not a launcher's result.
    pub fn read(path: impl AsRef<Path>) -> Result<LaunchResult> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).with_path(path)?;
        serde_json::from_str(&text).map_err(|e| Error::parse(path, "launcher result (JSON)", e))
    }
    /// The epochs' records, ready for [`loss_accuracy_curves`](crate::figures::loss_accuracy_curves).
    pub fn history(&self) -> Vec<EpochRecord> {
        self.metrics_history.iter().map(|r| r.record.clone()).collect()
    }
}
