//! Metrics of one's own in a run: [`Trainer::metric`], measured at every validation and test
//! over all ranks, logged beside the built-in ones and monitorable by name; and
//! [`Trainer::train_metric`], measured on the training batches (each epoch over all ranks,
//! each step on its rank).
use super::Trainer;
use crate::train::{IntoSharedMetric, SharedMetric};

/// Metrics of one's own, on the validation and on the training batches.
impl Trainer<'_> {
    /// Measures `metric` at every validation (and [`test`](Self::test)) over all ranks' samples:
    /// `val_<name>` in the epoch line, `metrics.jsonl` (with `val_<name>_per_class` where the
    /// metric has per-class values) and TensorBoard. Watch it with
    /// `.monitor(Monitor::of_metric(&metric))` (`best/`, `ReduceLROnPlateau`) or in an
    /// [`EarlyStopping`](crate::fit::EarlyStopping) (Lightning's `self.log` plus `monitor=`).
    ///
    /// ```no_run
    /// use trainbook::prelude::*;
    /// use trainbook::fit::EarlyStopping;
    /// use trainbook::train::Monitor;
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
    pub fn metric(mut self, metric: impl IntoSharedMetric) -> Self {
        self.cfg.metrics.push(metric.into_shared_metric());
        self
    }

    /// The same as [`metric`](Self::metric), which now also takes a shared metric (one of
    /// [`builtin_metric`](crate::train::builtin_metric)'s); `metric_shared` stays for one
    /// release.
    #[deprecated(note = "use Trainer::metric, which takes a shared metric too")]
    pub fn metric_shared(self, metric: SharedMetric) -> Self {
        self.metric(metric)
    }

    /// Measures `metric` on the training batches: over every epoch's samples of all ranks as
    /// `train_<name>` in the epoch line, `metrics.jsonl` and TensorBoard, and over each
    /// optimizer step's samples of rank 0 as a `<name>` column of `steps.csv` (before
    /// `wall_time`) and `step/<name>` in TensorBoard, as the step's loss is (Lightning's
    /// `self.log(..., on_step=True, on_epoch=True)` in `training_step`). The sums are computed
    /// on the device from each batch's output as the step saw it (in training mode; under
    /// MixUp/CutMix, against the mixed targets) and read with the loss, so no step waits for
    /// them; a resumed epoch continues them from its checkpoint. The same metric may be
    /// registered with [`metric`](Self::metric) too.
    ///
    /// ```no_run
    /// use trainbook::prelude::*;
    /// use trainbook::train::MulticlassScore;
    /// # fn run(dist: &Dist) {
    /// let trainer = Trainer::new(dist)
    ///     .train_metric(MulticlassScore::f1(10)) // train_f1_macro, and f1_macro in steps.csv
    ///     .metric(MulticlassScore::f1(10)); // val_f1_macro
    /// # }
    /// ```
    pub fn train_metric(mut self, metric: impl IntoSharedMetric) -> Self {
        self.cfg.train_metrics.push(metric.into_shared_metric());
        self
    }

    /// The same as [`train_metric`](Self::train_metric), which now also takes a shared metric;
    /// `train_metric_shared` stays for one release.
    #[deprecated(note = "use Trainer::train_metric, which takes a shared metric too")]
    pub fn train_metric_shared(self, metric: SharedMetric) -> Self {
        self.train_metric(metric)
    }
}
