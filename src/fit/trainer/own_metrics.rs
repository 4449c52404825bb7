//! Metrics of one's own in a run: [`Trainer::metric`], measured at every validation and test
//! over all ranks, logged beside the built-in ones and monitorable by name.
use std::sync::Arc;

use super::Trainer;
use crate::train::{Metric, SharedMetric};

impl Trainer<'_> {
    /// Measures `metric` at every validation (and [`test`](Self::test)) over all ranks' samples:
    /// `val_<name>` in the epoch line, `metrics.jsonl` (with `val_<name>_per_class` where the
    /// metric has per-class values) and TensorBoard. Watch it with
    /// `.monitor(Monitor::of_metric(&metric))` (`best/`, `ReduceLROnPlateau`) or in an
    /// [`EarlyStopping`](crate::fit::EarlyStopping) (Lightning's `self.log` plus `monitor=`).
    ///
    /// ```no_run
    /// use trainbook::prelude::*;
    /// use trainbook::train::{MulticlassAuroc, MulticlassScore};
    /// # fn run(dist: &Dist) {
    /// let f1 = MulticlassScore::f1(10);
    /// let trainer = Trainer::new(dist)
    ///     .monitor(Monitor::of_metric(&f1)) // best/ by the validation macro F1
    ///     .early_stopping(EarlyStopping::new(Monitor::of_metric(&f1), 5))
    ///     .metric(f1)
    ///     .metric(MulticlassAuroc::new(10, 200));
    /// # }
    /// ```
    pub fn metric(self, metric: impl Metric + 'static) -> Self {
        self.metric_shared(Arc::new(metric))
    }

    /// [`metric`](Self::metric) with a metric already shared, e.g. one of
    /// [`builtin_metric`](crate::train::builtin_metric)'s.
    pub fn metric_shared(mut self, metric: SharedMetric) -> Self {
        self.cfg.metrics.push(metric);
        self
    }
}
