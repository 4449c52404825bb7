//! The validation metric a run judges its epochs by ([`Monitor`]), with the [`Mode`] of its
//! values (whether lower or higher is better).
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::Metric;
use crate::optim::Mode;
use crate::train::{EpochSummary, Task};

/// The validation metric a run judges its epochs by (Lightning's `monitor`): which epoch
/// `best/` keeps, what early stopping watches, and, in the examples, what the plateau
/// schedule watches. Parsed from its name in `metrics.jsonl` (the examples' `--monitor-metric`):
/// `val_loss`, `val_acc`, `val_mae`, `val_rmse` or `val_f1`, or a [`Metric`] of one's own
/// ([`Monitor::of_metric`]; by name once registered with a `Trainer`, or for the built-in
/// metrics: `val_f1_macro`, `val_precision_weighted`, `val_auroc` and so on).
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
    /// A [`Metric`] of one's own, by its name and mode ([`Monitor::of_metric`]).
    #[serde(deserialize_with = "named_from_parts")]
    Metric(&'static MetricName),
}

/// A [`Metric`]'s name and mode, as a [`Monitor`] holds it.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetricName {
    /// The metric's [`name`](Metric::name) (without `val_`).
    pub name: String,
    /// Whether lower or higher is better.
    pub mode: Mode,
}

/// The names monitors were made for: each kept once for the process, so a `Monitor` stays
/// `Copy` (a run has a handful of metrics).
static NAMED: Mutex<Vec<&'static MetricName>> = Mutex::new(Vec::new());

fn intern(name: &str, mode: Mode) -> &'static MetricName {
    let mut named = NAMED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&n) = named.iter().find(|n| n.name == name && n.mode == mode) {
        return n;
    }
    let n: &'static MetricName = Box::leak(Box::new(MetricName { name: name.into(), mode }));
    named.push(n);
    n
}

fn named_from_parts<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<&'static MetricName, D::Error> {
    let n = MetricName::deserialize(d)?;
    Ok(intern(&n.name, n.mode))
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
            Monitor::Metric(n) => n.mode,
        }
    }

    /// The validation value of `metric` (`val_<name>`), in its mode.
    ///
    /// ```
    /// use trainbook::train::{Metric, Mode, Monitor, MulticlassScore};
    /// let m = Monitor::of_metric(&MulticlassScore::f1(3));
    /// assert_eq!((m.to_string(), m.mode()), ("val_f1_macro".to_string(), Mode::Max));
    /// assert_eq!("val_f1_macro".parse::<Monitor>()?, m);
    /// # Ok::<(), trainbook::Error>(())
    /// ```
    pub fn of_metric(metric: &dyn Metric) -> Monitor {
        Monitor::Metric(intern(metric.name(), metric.mode()))
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
            Monitor::Metric(n) => v.metric(&n.name).unwrap_or(f64::NAN),
        }
    }
}

impl std::fmt::Display for Monitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Monitor::Metric(n) = self {
            return write!(f, "val_{}", n.name);
        }
        let name = NAMES.iter().find(|(m, _)| m == self).map_or("?", |(_, n)| n);
        f.write_str(name)
    }
}

impl std::str::FromStr for Monitor {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Monitor> {
        if let Some((m, _)) = NAMES.iter().find(|(_, n)| *n == s) {
            return Ok(*m);
        }
        let metric = s.strip_prefix("val_").unwrap_or_default();
        let registered = NAMED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|n| n.name == metric)
            .copied();
        if let Some(n) = registered {
            return Ok(Monitor::Metric(n));
        }
        if let Ok(m) = super::builtin_metric(metric, 1) {
            return Ok(Monitor::of_metric(m.as_ref()));
        }
        let names: Vec<&str> = NAMES.iter().map(|(_, n)| *n).collect();
        Err(crate::Error::InvalidArgument(format!(
            "monitor {s:?}: use one of {}, a built-in metric (val_f1_macro, val_precision_micro, \
             val_recall_weighted, val_auroc, ...) or val_<name> of a metric registered with \
             Trainer::metric",
            names.join(", ")
        )))
    }
}
