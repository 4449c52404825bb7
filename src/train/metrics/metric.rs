//! Metrics of one's own: the [`Metric`] trait (a batch's sums on the device, a value from the
//! sums over every rank's samples), what an epoch reports of each ([`MetricValue`]), and the
//! names a run accepts for them.
//!
//! A metric is defined by sums, as torchmetrics' metrics with `dist_reduce_fx="sum"` are: each
//! batch adds a float64 vector on the device, the vectors of all ranks are summed once at the
//! epoch's end, and the value is computed from the totals. Counts stay exact in float64 up to
//! 2^53, so a value over 2 ranks is the value over their samples together, whatever the split.
use std::sync::Arc;

use tch::Tensor;

use super::Mode;

/// A validation metric of one's own (torchmetrics' `Metric`, with sums as its state): the
/// run computes it on every validation and test epoch, over all ranks, and logs it as
/// `val_<name>` in the epoch line, `metrics.jsonl` and TensorBoard; a
/// [`Monitor::of_metric`](super::Monitor::of_metric) makes it what `best/`, early stopping and
/// `ReduceLROnPlateau` watch. Register one with
/// [`Trainer::metric`](crate::fit::Trainer::metric).
///
/// ```
/// use trainbook::tch::{Kind, Tensor};
/// use trainbook::train::{Metric, Mode};
///
/// /// The share of samples whose arg-max is class 0 (a made-up example).
/// struct ShareOfClassZero;
///
/// impl Metric for ShareOfClassZero {
///     fn name(&self) -> &str { "share_of_class_0" }
///     fn mode(&self) -> Mode { Mode::Max }
///     fn sums_len(&self) -> usize { 2 }
///     fn batch_sums(&self, output: &Tensor, _target: &Tensor) -> Tensor {
///         let zeros = output.argmax(1, false).eq(0).sum(Kind::Double);
///         let n = Tensor::from(output.size()[0] as f64).to_device(output.device());
///         Tensor::stack(&[zeros, n], 0)
///     }
///     fn compute(&self, sums: &[f64]) -> f64 { sums[0] / sums[1] }
/// }
///
/// let m = ShareOfClassZero;
/// let logits = Tensor::from_slice(&[2.0f32, 1.0, 0.0, 3.0]).view([2, 2]);
/// let sums = Vec::<f64>::try_from(m.batch_sums(&logits, &Tensor::from_slice(&[0i64, 1])))?;
/// assert_eq!(m.compute(&sums), 0.5);
/// # Ok::<(), trainbook::tch::TchError>(())
/// ```
pub trait Metric: Send + Sync {
    /// The metric's name: logged as `val_<name>` (and `test_<name>` in a test stage). Letters,
    /// digits and `_`; not one of the built-in names (`loss`, `acc`, `mae`, `rmse`, `f1`,
    /// `top_k`).
    fn name(&self) -> &str;
    /// Whether a lower or a higher value is better.
    fn mode(&self) -> Mode;
    /// How many sums a batch adds (the same for every batch).
    fn sums_len(&self) -> usize;
    /// What a batch adds: a float64 vector of [`sums_len`](Self::sums_len) values on the
    /// output's device, from the model's `output` and the batch's `target` (padding repeats
    /// already removed; called without gradients, in the run's precision).
    fn batch_sums(&self, output: &Tensor, target: &Tensor) -> Tensor;
    /// The value from the sums over every sample of every rank.
    fn compute(&self, sums: &[f64]) -> f64;
    /// The value of every class, where the metric has one (logged as
    /// `val_<name>_per_class`). Default: none.
    fn per_class(&self, _sums: &[f64]) -> Option<Vec<f64>> {
        None
    }
}

impl std::fmt::Debug for dyn Metric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Metric({})", self.name())
    }
}

/// A metric shared by the runs of a `Trainer` (which is `Clone`).
pub type SharedMetric = Arc<dyn Metric>;

/// What `Trainer::metric` and `Trainer::train_metric` take: a metric, moved in, or one already
/// shared (`Arc<M>`, or a [`SharedMetric`] such as
/// [`builtin_metric`](crate::train::builtin_metric)'s).
pub trait IntoSharedMetric {
    /// The metric as the run holds it.
    fn into_shared_metric(self) -> SharedMetric;
}

impl<M: Metric + 'static> IntoSharedMetric for M {
    fn into_shared_metric(self) -> SharedMetric {
        Arc::new(self)
    }
}

impl<M: Metric + 'static> IntoSharedMetric for Arc<M> {
    fn into_shared_metric(self) -> SharedMetric {
        self
    }
}

impl IntoSharedMetric for SharedMetric {
    fn into_shared_metric(self) -> SharedMetric {
        self
    }
}

/// What an epoch measured of one [`Metric`].
#[derive(Clone, Debug, PartialEq)]
pub struct MetricValue {
    /// The metric's [`name`](Metric::name).
    pub name: String,
    /// Its value over the epoch's samples (all ranks).
    pub value: f64,
    /// Its value per class, where it has one.
    pub per_class: Option<Vec<f64>>,
    /// The sums it was computed from (all ranks).
    pub sums: Vec<f64>,
}

impl MetricValue {
    /// `metric`'s value from `sums`.
    pub(crate) fn of(metric: &dyn Metric, sums: Vec<f64>) -> MetricValue {
        MetricValue {
            name: metric.name().to_string(),
            value: metric.compute(&sums),
            per_class: metric.per_class(&sums),
            sums,
        }
    }
}

/// The names the built-in logs use after `val_`/`train_`: a metric of one's own may not take them.
const RESERVED: [&str; 7] = ["loss", "acc", "mae", "rmse", "f1", "f1_per_label", "top_k"];

/// Checks that every metric has a usable name (letters, digits, `_`), none reserved, none
/// twice: [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming the first that is not.
pub(crate) fn check_names(metrics: &[SharedMetric]) -> crate::Result<()> {
    let bad = |why: String| Err(crate::Error::InvalidArgument(why));
    for (i, m) in metrics.iter().enumerate() {
        let name = m.name();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return bad(format!("metric name {name:?}: use letters, digits and _"));
        }
        if RESERVED.contains(&name) || name.ends_with("_per_class") {
            return bad(format!(
                "metric name {name:?} is taken by the built-in logs ({}, or ending in _per_class)",
                RESERVED.join(", ")
            ));
        }
        if metrics[..i].iter().any(|other| other.name() == name) {
            return bad(format!("two metrics are named {name:?}"));
        }
        if m.sums_len() == 0 {
            return bad(format!("metric {name:?} keeps no sums (sums_len is 0)"));
        }
    }
    Ok(())
}
