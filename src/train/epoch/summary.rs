//! [`EpochSummary`]: what one epoch of training or evaluation measured, exactly over its
//! samples (all ranks), with the task's metrics.
use super::timing::data_wait_note;
use crate::train::loss::Task;
use crate::train::metrics::{ConfusionMatrix, MetricValue, RunningMetrics};

/// The result of an epoch. `loss` and `accuracy` are exact means over `samples`; the task's
/// other metrics come from [`metrics`](Self::metrics), the sums over all ranks.
#[derive(Clone, Debug, PartialEq)]
pub struct EpochSummary {
    /// Mean loss per sample.
    pub loss: f64,
    /// Fraction of samples predicted right (0 to 1): classification accuracy, or the
    /// exact-match ratio of a multi-label run; NaN for regression.
    pub accuracy: f64,
    /// Samples seen by all ranks (padding repeats excluded).
    pub samples: u64,
    /// Wall-clock seconds of the epoch.
    pub seconds: f64,
    /// Samples per second over all ranks (in a resumed epoch, of the samples trained since the
    /// resume: `samples` also counts the restored ones).
    pub img_per_s: f64,
    /// Seconds each rank (in rank order) waited for its data loader during the epoch.
    pub data_wait_s: Vec<f64>,
    /// On CUDA, a training epoch's peak of the caching allocator's allocated and reserved bytes
    /// on each rank's GPU (in rank order; `torch.cuda.max_memory_allocated` and
    /// `max_memory_reserved` over the epoch); empty on the CPU and from
    /// [`evaluate`](crate::train::evaluate).
    pub max_memory: Vec<(u64, u64)>,
    /// Filled by [`evaluate`](crate::train::evaluate) for classification: rows are true classes,
    /// columns predictions (all ranks).
    pub confusion: Option<ConfusionMatrix>,
    /// With norm clipping ([`EpochOptions::clip_grad`](crate::train::EpochOptions::clip_grad)): the
    /// mean over the epoch's optimizer steps of the total gradient norm before clipping (what
    /// `clip_grad_norm_` returns).
    pub grad_norm: Option<f64>,
    /// Optimizer steps the epoch took (one per accumulation window; 0 from
    /// [`evaluate`](crate::train::evaluate)): what a hand-written loop passes to
    /// [`Checkpointer::add_steps`](crate::checkpoint::Checkpointer::add_steps).
    pub steps: u64,
    /// What the epoch trained or evaluated: which metrics below mean something.
    pub task: Task,
    /// The `k` of the top-k accuracy, when one was asked for
    /// ([`EpochOptions::top_k`](crate::train::EpochOptions::top_k)).
    pub top_k: Option<usize>,
    /// The epoch's sums over all ranks, which every metric is computed from.
    pub metrics: RunningMetrics,
    /// The values of the run's own metrics ([`Metric`](crate::train::Metric)s: an evaluation's
    /// from [`EpochOptions::metrics`](crate::train::EpochOptions::metrics), a training epoch's
    /// from [`EpochOptions::train_metrics`](crate::train::EpochOptions::train_metrics)), in the
    /// order they were registered.
    pub user_metrics: Vec<MetricValue>,
}

impl EpochSummary {
    /// The summary of sums `m` (all ranks) of `task`, over `seconds`.
    pub(crate) fn new(task: Task, top_k: Option<usize>, m: RunningMetrics, seconds: f64) -> Self {
        EpochSummary {
            loss: m.loss(),
            accuracy: if task == Task::Regression { f64::NAN } else { m.accuracy() },
            samples: m.count,
            seconds,
            img_per_s: m.count as f64 / seconds.max(1e-9),
            data_wait_s: Vec::new(),
            max_memory: Vec::new(),
            confusion: None,
            grad_norm: None,
            steps: 0,
            task,
            top_k: top_k.filter(|_| task == Task::Classification),
            metrics: m,
            user_metrics: Vec::new(),
        }
    }
    /// The value of the run's own metric `name` ([`Metric::name`](crate::train::Metric::name)),
    /// when the epoch measured one.
    pub fn metric(&self, name: &str) -> Option<f64> {
        self.user_metrics.iter().find(|m| m.name == name).map(|m| m.value)
    }
    /// Classification with a top-k count: the top-k accuracy in [0, 1].
    pub fn top_k_accuracy(&self) -> Option<f64> {
        self.top_k.map(|_| self.metrics.top_k_accuracy())
    }
    /// Regression: the mean absolute error over every target value.
    pub fn mae(&self) -> Option<f64> {
        (self.task == Task::Regression).then(|| self.metrics.mae())
    }
    /// Regression: the root mean squared error over every target value.
    pub fn rmse(&self) -> Option<f64> {
        (self.task == Task::Regression).then(|| self.metrics.rmse())
    }
    /// Multi-label: the F1 score of every label.
    pub fn f1_per_label(&self) -> Option<Vec<f64>> {
        (self.task == Task::MultiLabel).then(|| self.metrics.f1_per_label())
    }
    /// Multi-label: the macro F1 score (the mean of the per-label scores).
    pub fn f1_macro(&self) -> Option<f64> {
        (self.task == Task::MultiLabel).then(|| self.metrics.f1_macro())
    }
}

impl std::fmt::Display for EpochSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "loss {:.4}  ", self.loss)?;
        match self.task {
            Task::Classification => write!(f, "acc {:.2}%", self.accuracy * 100.0)?,
            Task::Regression => {
                write!(f, "mae {:.4}  rmse {:.4}", self.metrics.mae(), self.metrics.rmse())?
            }
            Task::MultiLabel => {
                write!(f, "f1 {:.4}  exact {:.2}%", self.metrics.f1_macro(), self.accuracy * 100.0)?
            }
        }
        if let (Some(k), Some(a)) = (self.top_k, self.top_k_accuracy()) {
            write!(f, "  top-{k} {:.2}%", a * 100.0)?;
        }
        for m in &self.user_metrics {
            write!(f, "  {} {:.4}", m.name, m.value)?;
        }
        write!(
            f,
            "  {} samples  {:.1} s  {:.1} img/s",
            self.samples, self.seconds, self.img_per_s
        )?;
        if let Some(n) = self.grad_norm {
            write!(f, "  grad norm {n:.3}")?;
        }
        let note = data_wait_note(&self.data_wait_s, self.seconds);
        if !note.is_empty() {
            write!(f, "  {note}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_task_shows_its_metrics() {
        let m = RunningMetrics { loss_sum: 2.0, correct: 3, count: 4, ..Default::default() };
        let c = EpochSummary::new(Task::Classification, None, m.clone(), 2.0);
        assert!(c.to_string().starts_with("loss 0.5000  acc 75.00%  4 samples  2.0 s  2.0 img/s"));
        let m = RunningMetrics { abs_error_sum: 2.0, squared_error_sum: 4.0, values: 4, ..m };
        let r = EpochSummary::new(Task::Regression, Some(5), m, 2.0);
        assert!(r.accuracy.is_nan() && r.top_k.is_none());
        assert_eq!((r.mae(), r.rmse(), r.f1_macro()), (Some(0.5), Some(1.0), None));
        assert!(r.to_string().starts_with("loss 0.5000  mae 0.5000  rmse 1.0000  4 samples"));
    }
}
