//! The [`Mode`] of a monitored metric (whether lower or higher is better) and the validation
//! metric a run judges its epochs by ([`Monitor`]).
use serde::{Deserialize, Serialize};

use crate::train::{EpochSummary, Task};

/// Whether a lower (loss) or higher (accuracy) monitored value is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    /// Lower is better (torch's `mode="min"`), e.g. a loss.
    Min,
    /// Higher is better (torch's `mode="max"`), e.g. an accuracy.
    Max,
}

/// The validation metric a run judges its epochs by (Lightning's `monitor`): which epoch
/// `best/` keeps, what early stopping watches, and, in the examples, what the plateau
/// schedule watches. Parsed from its name in `metrics.jsonl` (the examples' `--monitor-metric`):
/// `val_loss`, `val_acc`, `val_mae`, `val_rmse` or `val_f1`.
///
/// ```
/// use trainbook::train::{Mode, Monitor};
/// let m: Monitor = "val_acc".parse()?;
/// assert_eq!((m, m.mode(), m.to_string()), (Monitor::ValAcc, Mode::Max, "val_acc".to_string()));
/// assert_eq!("val_mae".parse::<Monitor>()?.mode(), Mode::Min);
/// assert!("accuracy".parse::<Monitor>().is_err());
/// # Ok::<(), trainbook::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Monitor {
    /// The mean validation loss; lower is better.
    ValLoss,
    /// The validation accuracy (classification); higher is better.
    ValAcc,
    /// The validation mean absolute error (regression); lower is better.
    ValMae,
    /// The validation root mean squared error (regression); lower is better.
    ValRmse,
    /// The validation macro F1 score, the mean of the per-label F1 scores (multi-label);
    /// higher is better.
    ValF1,
}

const NAMES: [(Monitor, &str); 5] = [
    (Monitor::ValLoss, "val_loss"),
    (Monitor::ValAcc, "val_acc"),
    (Monitor::ValMae, "val_mae"),
    (Monitor::ValRmse, "val_rmse"),
    (Monitor::ValF1, "val_f1"),
];

impl Monitor {
    /// The direction that is better: [`Mode::Min`] for the loss and the errors, [`Mode::Max`]
    /// for accuracy and F1.
    pub fn mode(self) -> Mode {
        match self {
            Monitor::ValLoss | Monitor::ValMae | Monitor::ValRmse => Mode::Min,
            Monitor::ValAcc | Monitor::ValF1 => Mode::Max,
        }
    }

    /// The metric a [`Mode`] has always meant in trainbook for classification (`Min`: the
    /// loss, `Max`: accuracy).
    pub fn of_mode(mode: Mode) -> Monitor {
        Monitor::default_for(Task::Classification, mode)
    }

    /// The metric a run of `task` judges by when only a [`Mode`] is given (a checkpoint
    /// policy's `best`): the loss for `Min`; for `Max` the accuracy (classification), macro
    /// F1 (multi-label), or still the loss for regression, where nothing higher is better.
    pub fn default_for(task: Task, mode: Mode) -> Monitor {
        match (task, mode) {
            (_, Mode::Min) | (Task::Regression, Mode::Max) => Monitor::ValLoss,
            (Task::Classification, Mode::Max) => Monitor::ValAcc,
            (Task::MultiLabel, Mode::Max) => Monitor::ValF1,
        }
    }

    /// This metric of a validation epoch; NaN when the epoch's task has no such metric (an
    /// accuracy of a regression run, say).
    pub fn value(self, v: &EpochSummary) -> f64 {
        match self {
            Monitor::ValLoss => v.loss,
            Monitor::ValAcc => v.accuracy,
            Monitor::ValMae => v.mae().unwrap_or(f64::NAN),
            Monitor::ValRmse => v.rmse().unwrap_or(f64::NAN),
            Monitor::ValF1 => v.f1_macro().unwrap_or(f64::NAN),
        }
    }
}

impl std::fmt::Display for Monitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = NAMES.iter().find(|(m, _)| m == self).map_or("?", |(_, n)| n);
        f.write_str(name)
    }
}

impl std::str::FromStr for Monitor {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Monitor> {
        NAMES.iter().find(|(_, n)| *n == s).map(|(m, _)| *m).ok_or_else(|| {
            let names: Vec<&str> = NAMES.iter().map(|(_, n)| *n).collect();
            crate::Error::InvalidArgument(format!("monitor {s:?}: use one of {}", names.join(", ")))
        })
    }
}
