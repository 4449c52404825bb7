//! Per-sample exact running metrics ([`RunningMetrics`]) for every task: loss and accuracy
//! (top-k too) for classes, mean absolute and root mean squared error for regression, F1 per
//! label for multi-label; the confusion matrix; the [`Mode`] and [`Monitor`] of the metric a
//! run judges its epochs by; metrics of one's own ([`Metric`]) and the built-in ones of that
//! shape: multiclass precision, recall and F1 ([`MulticlassScore`]) and AUROC
//! ([`MulticlassAuroc`]), torchmetrics' values bit for bit.
//!
//! The course averages `loss / len(x)` per batch and then over batches, which weighs a short
//! last batch as much as a full one; here every metric is a sum (or a count) over samples
//! divided at the end, so it equals the value over the whole epoch exactly, and the sums of
//! several ranks add up to the sums over all their samples.
use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

mod auroc;
mod classwise;
mod confusion;
mod metric;
mod monitor;

pub use crate::optim::Mode;
pub use auroc::MulticlassAuroc;
pub use classwise::{Average, MulticlassScore};
pub use confusion::ConfusionMatrix;
pub(crate) use metric::check_names;
pub use metric::{IntoSharedMetric, Metric, MetricValue, SharedMetric};
pub use monitor::{MetricName, Monitor};

/// The thresholds of [`builtin_metric`]'s `auroc`.
pub const AUROC_THRESHOLDS: usize = 100;

/// A built-in [`Metric`] by its name, for `classes` classes: `precision_`, `recall_` or `f1_`
/// followed by `micro`, `macro` or `weighted` ([`MulticlassScore`]), or `auroc`
/// ([`MulticlassAuroc`] over [`AUROC_THRESHOLDS`] thresholds); else
/// [`Error::InvalidArgument`](crate::Error::InvalidArgument) listing them.
///
/// ```
/// use trainbook::train::{builtin_metric, Metric};
/// assert_eq!(builtin_metric("recall_weighted", 3)?.name(), "recall_weighted");
/// assert!(builtin_metric("f2_macro", 3).is_err());
/// # Ok::<(), trainbook::Error>(())
/// ```
pub fn builtin_metric(name: &str, classes: usize) -> crate::Result<SharedMetric> {
    if name == "auroc" {
        return Ok(std::sync::Arc::new(MulticlassAuroc::new(classes, AUROC_THRESHOLDS)));
    }
    let averages = [Average::Micro, Average::Macro, Average::Weighted];
    let scores = [MulticlassScore::precision, MulticlassScore::recall, MulticlassScore::f1];
    let all = scores.iter().flat_map(|make| averages.map(|a| make(classes).average(a)));
    let mut names = Vec::new();
    for score in all {
        if score.name() == name {
            return Ok(std::sync::Arc::new(score));
        }
        names.push(score.name().to_string());
    }
    Err(crate::Error::InvalidArgument(format!(
        "metric {name:?}: the built-in ones are {}, auroc",
        names.join(", ")
    )))
}

/// Sums over the samples seen so far: the loss, and the counts and errors the task's metrics
/// are made of (fields that a task does not use stay 0 or empty).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunningMetrics {
    /// Sum of the per-sample losses.
    pub loss_sum: f64,
    /// With a loss that weighs its samples (cross-entropy with class `weight` or an
    /// `ignore_index`: [`Loss::sample_weights`](crate::train::Loss::sample_weights)): the sum of
    /// the samples' weights, which the loss sum is divided by, as torch's `reduction="mean"`
    /// divides a batch's; `None` for a loss whose samples all weigh 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_weight: Option<f64>,
    /// Samples predicted right: the arg-max logit is the label (classification), or every
    /// label's prediction is right (multi-label: the exact-match count).
    pub correct: u64,
    /// Number of samples.
    pub count: u64,
    /// Classification with a top-k accuracy asked for: samples whose label is among the `k`
    /// highest logits.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub top_k_correct: u64,
    /// Regression: the sum of `|output - target|` over every target value.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub abs_error_sum: f64,
    /// Regression: the sum of `(output - target)^2` over every target value.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub squared_error_sum: f64,
    /// Regression: the number of target values summed over (samples times outputs).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub values: u64,
    /// Multi-label: `[true positives, false positives, false negatives]` of every label (a
    /// label is predicted where its logit is above 0).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub label_counts: Vec<[u64; 3]>,
    /// The sums of the run's own training metrics
    /// ([`Trainer::train_metric`](crate::fit::Trainer::train_metric)), each metric's
    /// [`sums_len`](Metric::sums_len) values in the order they were registered (empty without
    /// them). Every rank of a run has as many, so they add up element by element.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub own_sums: Vec<f64>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn is_zero_f64(v: &f64) -> bool {
    *v == 0.0
}

/// The sums before the per-label counts in [`RunningMetrics::to_sums`].
const FIXED_SUMS: usize = 9;

/// `a / b`, NaN when `b` is 0.
fn ratio(a: f64, b: u64) -> f64 {
    if b == 0 {
        f64::NAN
    } else {
        a / b as f64
    }
}

impl RunningMetrics {
    /// Adds a classification batch given its per-sample summed loss, the logits and the
    /// labels (on the host: this reads the device; training loops keep their sums on the
    /// device instead, see [`DeviceMetrics`](super::DeviceMetrics)).
    pub fn add_batch(&mut self, loss_sum: f64, logits: &Tensor, labels: &Tensor) {
        let correct = logits.argmax(1, false).eq_tensor(labels).sum(Kind::Int64).int64_value(&[]);
        self.loss_sum += loss_sum;
        self.correct += correct as u64;
        self.count += labels.size()[0] as u64;
    }
    /// Adds `other`'s sums to these (e.g. another rank's, or a resumed epoch's first part).
    pub fn merge(&mut self, other: &RunningMetrics) {
        self.loss_sum += other.loss_sum;
        self.loss_weight = match (self.loss_weight, other.loss_weight) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        self.correct += other.correct;
        self.count += other.count;
        self.top_k_correct += other.top_k_correct;
        self.abs_error_sum += other.abs_error_sum;
        self.squared_error_sum += other.squared_error_sum;
        self.values += other.values;
        if self.label_counts.len() < other.label_counts.len() {
            self.label_counts.resize(other.label_counts.len(), [0; 3]);
        }
        for (mine, theirs) in self.label_counts.iter_mut().zip(&other.label_counts) {
            for (a, b) in mine.iter_mut().zip(theirs) {
                *a += b;
            }
        }
        if self.own_sums.len() < other.own_sums.len() {
            self.own_sums.resize(other.own_sums.len(), 0.0);
        }
        for (a, b) in self.own_sums.iter_mut().zip(&other.own_sums) {
            *a += b;
        }
    }
    /// The sums as one list of f64s, for an element-wise all-reduce over ranks (counts stay
    /// exact in f64 up to 2^53 samples), [`own_sums`](Self::own_sums) aside (their length is
    /// the run's, not the data's: [`sum_over`](Self::sum_over) adds them after these);
    /// [`from_sums`](Self::from_sums) reads them back. A new
    /// metric is a field here and there, and every reduction over ranks carries it. Every
    /// rank of a multi-label run has the same number of labels, so the lists line up.
    ///
    /// ```
    /// use trainbook::train::RunningMetrics;
    /// let m = RunningMetrics { loss_sum: 3.5, correct: 7, count: 10, ..Default::default() };
    /// assert_eq!(RunningMetrics::from_sums(&m.to_sums()), m);
    /// let labels = RunningMetrics { label_counts: vec![[1, 2, 3], [4, 5, 6]], ..m.clone() };
    /// assert_eq!(RunningMetrics::from_sums(&labels.to_sums()), labels);
    /// ```
    pub fn to_sums(&self) -> Vec<f64> {
        let mut sums = vec![
            self.loss_sum,
            self.correct as f64,
            self.count as f64,
            self.top_k_correct as f64,
            self.abs_error_sum,
            self.squared_error_sum,
            self.values as f64,
            // The weights' sum, and 1 where there is one: a rank that added no batch yet (a
            // resumed epoch's other ranks) has none, and the sum over ranks still has one.
            self.loss_weight.unwrap_or(0.0),
            f64::from(u8::from(self.loss_weight.is_some())),
        ];
        sums.extend(self.label_counts.iter().flatten().map(|&c| c as f64));
        sums
    }
    /// The metrics from sums made by [`to_sums`](Self::to_sums) (and summed over ranks);
    /// [`own_sums`](Self::own_sums), which `to_sums` leaves out, empty.
    pub fn from_sums(sums: &[f64]) -> RunningMetrics {
        let at = |i: usize| sums.get(i).copied().unwrap_or(0.0);
        let count = |i: usize| at(i).round() as u64;
        let labels = sums.get(FIXED_SUMS..).unwrap_or_default();
        RunningMetrics {
            loss_sum: at(0),
            correct: count(1),
            count: count(2),
            top_k_correct: count(3),
            abs_error_sum: at(4),
            squared_error_sum: at(5),
            values: count(6),
            loss_weight: (at(8) > 0.0).then(|| at(7)),
            label_counts: labels
                .chunks_exact(3)
                .map(|c| [c[0].round() as u64, c[1].round() as u64, c[2].round() as u64])
                .collect(),
            own_sums: Vec::new(),
        }
    }
    /// These metrics summed over all ranks of `dist` (the one place they are reduced: `Ddp`'s
    /// epoch metrics and the checkpoint's both come here); a world of one returns them
    /// unchanged.
    pub fn sum_over(self, dist: &crate::dist::Dist) -> crate::Result<RunningMetrics> {
        // The own metrics' sums ride after the others (every rank has as many).
        let mut sums = self.to_sums();
        let at = sums.len();
        sums.extend(&self.own_sums);
        let mut total = dist.sum_f64(&sums)?;
        let own_sums = total.split_off(at);
        Ok(RunningMetrics { own_sums, ..RunningMetrics::from_sums(&total) })
    }
    /// Mean per-sample loss, `loss_sum / count`, or with a loss that weighs its samples
    /// `loss_sum / loss_weight` (torch's weighted mean); NaN when no sample (or no weight: every
    /// sample ignored, as torch's mean then is) was added.
    pub fn loss(&self) -> f64 {
        match self.loss_weight {
            Some(w) if w != 0.0 => self.loss_sum / w,
            Some(_) => f64::NAN,
            None => ratio(self.loss_sum, self.count),
        }
    }
    /// Fraction of samples predicted right in [0, 1], `correct / count` (multi-label: the
    /// exact-match ratio, torchmetrics' `MultilabelExactMatch`); NaN when no sample was added.
    pub fn accuracy(&self) -> f64 {
        ratio(self.correct as f64, self.count)
    }
    /// Top-k accuracy in [0, 1], `top_k_correct / count` (torchmetrics'
    /// `MulticlassAccuracy(top_k=k, average="micro")`); NaN when no sample was added.
    pub fn top_k_accuracy(&self) -> f64 {
        ratio(self.top_k_correct as f64, self.count)
    }
    /// Mean absolute error over every target value (torchmetrics' `MeanAbsoluteError`); NaN
    /// without regression values.
    pub fn mae(&self) -> f64 {
        ratio(self.abs_error_sum, self.values)
    }
    /// Root mean squared error over every target value (torchmetrics'
    /// `MeanSquaredError(squared=False)`); NaN without regression values.
    pub fn rmse(&self) -> f64 {
        ratio(self.squared_error_sum, self.values).sqrt()
    }
    /// F1 of every label, `2 tp / (2 tp + fp + fn)`, 0 for a label never present nor
    /// predicted (torchmetrics' `MultilabelF1Score(average=None)`, `zero_division=0`).
    pub fn f1_per_label(&self) -> Vec<f64> {
        let f1 = |&[tp, fp, fn_]: &[u64; 3]| {
            let denominator = 2 * tp + fp + fn_;
            if denominator == 0 {
                0.0
            } else {
                2.0 * tp as f64 / denominator as f64
            }
        };
        self.label_counts.iter().map(f1).collect()
    }
    /// The mean of [`f1_per_label`](Self::f1_per_label) (torchmetrics'
    /// `MultilabelF1Score(average="macro")`); NaN without labels.
    pub fn f1_macro(&self) -> f64 {
        let f1 = self.f1_per_label();
        ratio(f1.iter().sum(), f1.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_metrics_are_per_sample() {
        let mut m = RunningMetrics::default();
        m.add_batch(
            3.0,
            &Tensor::from_slice(&[1.0f32, 0.0, 0.0, 1.0]).view([2, 2]),
            &Tensor::from_slice(&[0i64, 1]),
        );
        m.add_batch(
            1.0,
            &Tensor::from_slice(&[0.0f32, 1.0]).view([1, 2]),
            &Tensor::from_slice(&[1i64]),
        );
        assert_eq!((m.count, m.correct), (3, 3));
        assert!((m.loss() - 4.0 / 3.0).abs() < 1e-12);
        let mut c = ConfusionMatrix::new(3);
        c.add(&Tensor::from_slice(&[0i64, 2, 2, 1]), &Tensor::from_slice(&[0i64, 2, 1, 1]));
        assert_eq!(c.counts, vec![vec![1, 0, 0], vec![0, 1, 1], vec![0, 0, 1]]);
        assert_eq!(c.per_class_accuracy()[1], 0.5);
        assert_eq!(c.accuracy(), 0.75);
    }

    #[test]
    fn task_metrics_follow_their_definitions_and_merge_as_sums() {
        let a = RunningMetrics {
            count: 2,
            abs_error_sum: 3.0,
            squared_error_sum: 5.0,
            values: 4,
            label_counts: vec![[1, 0, 1], [0, 0, 0]],
            ..Default::default()
        };
        let b = RunningMetrics {
            count: 2,
            abs_error_sum: 1.0,
            squared_error_sum: 3.0,
            values: 4,
            label_counts: vec![[1, 1, 0], [0, 2, 0]],
            ..Default::default()
        };
        let mut all = a.clone();
        all.merge(&b);
        assert_eq!((all.mae(), all.rmse()), (0.5, 1.0));
        // Label 0: tp 2, fp 1, fn 1 -> 4/6; label 1: never present, predicted twice -> 0.
        assert_eq!(all.f1_per_label(), [4.0 / 6.0, 0.0]);
        assert_eq!(all.f1_macro(), 2.0 / 6.0);
        assert_eq!(RunningMetrics::from_sums(&all.to_sums()), all);
        assert_eq!(all.loss_weight, None);
        // Weighted losses: the weights add up, the loss divides by them, and they survive the
        // sums over ranks and a checkpoint's JSON.
        let w = |loss_sum, weight| RunningMetrics {
            loss_sum,
            loss_weight: Some(weight),
            count: 4,
            ..Default::default()
        };
        let mut weighted = w(3.0, 1.5);
        weighted.merge(&w(2.0, 2.5));
        assert_eq!((weighted.loss_weight, weighted.loss()), (Some(4.0), 5.0 / 4.0));
        assert_eq!(RunningMetrics::from_sums(&weighted.to_sums()), weighted);
        // Summed over ranks where one has no weights yet (a resumed epoch's other rank).
        let other = RunningMetrics { loss_sum: 1.0, count: 2, ..Default::default() };
        let summed: Vec<f64> =
            weighted.to_sums().iter().zip(other.to_sums()).map(|(a, b)| a + b).collect();
        assert_eq!(RunningMetrics::from_sums(&summed).loss_weight, Some(4.0));
        let json = serde_json::to_string(&weighted).unwrap();
        assert_eq!(serde_json::from_str::<RunningMetrics>(&json).unwrap(), weighted);
        assert!(w(0.0, 0.0).loss().is_nan(), "every sample ignored: NaN, as torch's mean");
        let none = RunningMetrics::default();
        assert!(none.mae().is_nan() && none.f1_macro().is_nan() && none.accuracy().is_nan());
        // An old checkpoint's metrics (three fields) still read.
        let old: RunningMetrics =
            serde_json::from_str(r#"{"loss_sum":1.5,"correct":2,"count":3}"#).unwrap();
        assert_eq!((old.correct, old.values, old.label_counts.len()), (2, 0, 0));
    }
}
