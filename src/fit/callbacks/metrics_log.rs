//! `OUT/metrics.jsonl` as a callback: rank 0 writes the epochs before the run's first one again
//! (those a resumed run inherits, so that the log holds no epoch the resume redoes), then
//! appends every epoch's record as it ends.
use std::path::PathBuf;

use crate::fit::callbacks::{Callback, FitStart};
use crate::train::{append_record, EpochRecord};
use crate::{Result, WithPath};

/// The file name of the metrics log in a run's output folder.
pub(crate) const METRICS_LOG: &str = "metrics.jsonl";

/// Writes `metrics.jsonl` (rank 0 only).
#[derive(Default)]
pub(crate) struct MetricsLog {
    /// The log's path, on rank 0 once the run started.
    path: Option<PathBuf>,
}

impl Callback for MetricsLog {
    fn on_fit_start(&mut self, start: &FitStart) -> Result<()> {
        if start.rank != 0 {
            return Ok(());
        }
        std::fs::create_dir_all(start.out).with_path(start.out)?;
        let path = start.out.join(METRICS_LOG);
        let _ = std::fs::remove_file(&path);
        start.history.iter().try_for_each(|r| append_record(&path, r))?;
        self.path = Some(path);
        Ok(())
    }

    fn on_epoch_end(&mut self, record: &EpochRecord, _steps_done: u64) -> Result<()> {
        match &self.path {
            Some(path) => append_record(path, record),
            None => Ok(()),
        }
    }
}
