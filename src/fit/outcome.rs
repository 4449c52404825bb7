//! What a training run reports: [`FitReport`], the same on every rank.
use std::path::PathBuf;

use crate::fit::stop::interrupt::Interruption;
use crate::train::{ConfusionMatrix, EpochRecord, Monitor};

/// The outcome of [`Trainer::fit`](crate::fit::Trainer::fit), the same on every rank. It is
/// `Serialize`, so a [`spawn`](crate::launch::spawn)ed rank can return it.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct FitReport {
    /// One record per epoch trained so far (a resumed run includes the earlier epochs).
    pub history: Vec<EpochRecord>,
    /// The last validation epoch's confusion matrix (`None` if no epoch ran).
    pub confusion: Option<ConfusionMatrix>,
    /// The best validation accuracy seen: `best/`'s when `best/` is kept by accuracy (the
    /// default for classification), else the highest in `history`; `None` without `best/` or
    /// without an accuracy (regression).
    pub best_val_acc: Option<f64>,
    /// The metric `best/` is kept by and its best value so far (`None` without `best/`, or
    /// before a validation).
    #[serde(default)]
    pub best: Option<(Monitor, f64)>,
    /// Set when training continued from a checkpoint: (directory, epoch, batches done).
    pub resumed_from: Option<(PathBuf, u64, u64)>,
    /// Set when the run was interrupted (Ctrl-C, SIGTERM, SIGUSR1, `OUT/STOP`,
    /// `request_stop`): where, why, and the checkpoint to resume from.
    pub interrupted: Option<Interruption>,
    /// Set when early stopping ended the run: the last epoch trained (0-based). A resumed
    /// run that had stopped early says so and trains nothing.
    #[serde(default)]
    pub early_stopped: Option<u64>,
}

impl FitReport {
    /// The last epoch's record, if any epoch ran.
    pub fn last(&self) -> Option<&EpochRecord> {
        self.history.last()
    }
}
