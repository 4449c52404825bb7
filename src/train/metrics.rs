//! Per-sample exact running metrics, the confusion matrix, and the [`Mode`] of a monitored
//! metric (whether lower or higher is better).
//!
//! The course averages `loss / len(x)` per batch and then over batches, which weighs a short
//! last batch as much as a full one; here loss and accuracy are sums over samples divided by
//! the number of samples, so they equal the value over the whole epoch exactly.
use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

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
/// schedule watches. Parsed from `val_loss` or `val_acc` (the examples' `--monitor`).
///
/// ```
/// use trainbook::train::{Mode, Monitor};
/// let m: Monitor = "val_acc".parse()?;
/// assert_eq!((m, m.mode(), m.to_string()), (Monitor::ValAcc, Mode::Max, "val_acc".to_string()));
/// assert!("accuracy".parse::<Monitor>().is_err());
/// # Ok::<(), trainbook::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Monitor {
    /// The mean validation loss; lower is better.
    ValLoss,
    /// The validation accuracy; higher is better.
    ValAcc,
}

impl Monitor {
    /// The direction that is better: [`Mode::Min`] for the loss, [`Mode::Max`] for accuracy.
    pub fn mode(self) -> Mode {
        match self {
            Monitor::ValLoss => Mode::Min,
            Monitor::ValAcc => Mode::Max,
        }
    }

    /// The metric a [`Mode`] has always meant in trainbook (`Min`: the loss, `Max`: accuracy).
    pub fn of_mode(mode: Mode) -> Monitor {
        match mode {
            Mode::Min => Monitor::ValLoss,
            Mode::Max => Monitor::ValAcc,
        }
    }

    /// The monitored value of a validation with this loss and accuracy.
    pub fn value(self, loss: f64, accuracy: f64) -> f64 {
        match self {
            Monitor::ValLoss => loss,
            Monitor::ValAcc => accuracy,
        }
    }
}

impl std::fmt::Display for Monitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Monitor::ValLoss => "val_loss",
            Monitor::ValAcc => "val_acc",
        })
    }
}

impl std::str::FromStr for Monitor {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Monitor> {
        match s {
            "val_loss" => Ok(Monitor::ValLoss),
            "val_acc" => Ok(Monitor::ValAcc),
            other => Err(crate::Error::InvalidArgument(format!(
                "monitor {other:?}: use val_loss or val_acc"
            ))),
        }
    }
}

/// Sums of loss and correct predictions over the samples seen so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunningMetrics {
    /// Sum of the per-sample losses.
    pub loss_sum: f64,
    /// Number of samples whose arg-max logit is the label.
    pub correct: u64,
    /// Number of samples.
    pub count: u64,
}

impl RunningMetrics {
    /// Adds a batch given its per-sample summed loss, the logits and the labels.
    pub fn add_batch(&mut self, loss_sum: f64, logits: &Tensor, labels: &Tensor) {
        let correct = logits.argmax(1, false).eq_tensor(labels).sum(Kind::Int64).int64_value(&[]);
        self.loss_sum += loss_sum;
        self.correct += correct as u64;
        self.count += labels.size()[0] as u64;
    }
    /// Adds `other`'s sums to these (e.g. another rank's, or a resumed epoch's first part).
    pub fn merge(&mut self, other: &RunningMetrics) {
        self.loss_sum += other.loss_sum;
        self.correct += other.correct;
        self.count += other.count;
    }
    /// The sums as one list of f64s, for an element-wise all-reduce over ranks (counts stay
    /// exact in f64 up to 2^53 samples); [`from_sums`](Self::from_sums) reads them back. A new
    /// metric is a field here and there, and every reduction over ranks carries it.
    ///
    /// ```
    /// use trainbook::train::RunningMetrics;
    /// let m = RunningMetrics { loss_sum: 3.5, correct: 7, count: 10 };
    /// assert_eq!(RunningMetrics::from_sums(&m.to_sums()), m);
    /// ```
    pub fn to_sums(&self) -> [f64; 3] {
        [self.loss_sum, self.correct as f64, self.count as f64]
    }
    /// The metrics from sums made by [`to_sums`](Self::to_sums) (and summed over ranks).
    pub fn from_sums(sums: &[f64]) -> RunningMetrics {
        let at = |i: usize| sums.get(i).copied().unwrap_or(0.0);
        RunningMetrics {
            loss_sum: at(0),
            correct: at(1).round() as u64,
            count: at(2).round() as u64,
        }
    }
    /// Mean per-sample loss, `loss_sum / count`; NaN when no sample was added.
    pub fn loss(&self) -> f64 {
        if self.count == 0 {
            f64::NAN
        } else {
            self.loss_sum / self.count as f64
        }
    }
    /// Fraction of correct predictions in [0, 1], `correct / count`; NaN when no sample was
    /// added.
    pub fn accuracy(&self) -> f64 {
        if self.count == 0 {
            f64::NAN
        } else {
            self.correct as f64 / self.count as f64
        }
    }
}

/// A confusion matrix, `counts[true][predicted]` (scikit-learn's `confusion_matrix` layout:
/// rows are true classes, columns predictions).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ConfusionMatrix {
    /// `counts[t][p]`: samples of true class `t` predicted as `p`; square, one row per class.
    pub counts: Vec<Vec<u64>>,
}

impl ConfusionMatrix {
    /// An all-zero matrix for `classes` classes.
    pub fn new(classes: usize) -> ConfusionMatrix {
        ConfusionMatrix { counts: vec![vec![0; classes]; classes] }
    }
    /// Number of classes (rows).
    pub fn classes(&self) -> usize {
        self.counts.len()
    }
    /// Adds predicted and true labels (int64 tensors of equal length, on any device). Pairs
    /// with a label outside `0..classes` are ignored.
    pub fn add(&mut self, predicted: &Tensor, labels: &Tensor) {
        let p: Vec<i64> = Vec::try_from(predicted.to_device(tch::Device::Cpu).to_kind(Kind::Int64))
            .unwrap_or_default();
        let t: Vec<i64> = Vec::try_from(labels.to_device(tch::Device::Cpu).to_kind(Kind::Int64))
            .unwrap_or_default();
        for (&pi, &ti) in p.iter().zip(&t) {
            if let (Ok(pi), Ok(ti)) = (usize::try_from(pi), usize::try_from(ti)) {
                if pi < self.classes() && ti < self.classes() {
                    self.counts[ti][pi] += 1;
                }
            }
        }
    }
    /// Number of samples counted.
    pub fn total(&self) -> u64 {
        self.counts.iter().flatten().sum()
    }
    /// Overall accuracy in [0, 1]: the diagonal's sum over the total (0 when empty).
    pub fn accuracy(&self) -> f64 {
        let right: u64 = (0..self.classes()).map(|i| self.counts[i][i]).sum();
        right as f64 / self.total().max(1) as f64
    }
    /// Recall of every class (correct / samples of that class); NaN for an absent class.
    pub fn per_class_accuracy(&self) -> Vec<f64> {
        self.counts
            .iter()
            .enumerate()
            .map(|(i, row)| {
                let n: u64 = row.iter().sum();
                if n == 0 {
                    f64::NAN
                } else {
                    row[i] as f64 / n as f64
                }
            })
            .collect()
    }
    /// The classes that occur, as a true label or as a prediction, in increasing order: with
    /// 1000 output classes and a dozen in the data, the dozen (and any class predicted wrongly).
    pub fn present_classes(&self) -> Vec<usize> {
        let n = self.classes();
        (0..n).filter(|&i| (0..n).any(|j| self.counts[i][j] + self.counts[j][i] > 0)).collect()
    }
    /// The matrix of only `classes` (rows and columns in that order); samples whose true class
    /// or prediction is outside them are left out. Indices past the matrix are ignored.
    ///
    /// ```
    /// use trainbook::train::ConfusionMatrix;
    /// let cm = ConfusionMatrix { counts: vec![vec![0; 5], vec![0, 3, 0, 1, 0], vec![0; 5], vec![0, 2, 0, 4, 0], vec![0; 5]] };
    /// assert_eq!(cm.present_classes(), [1, 3]);
    /// assert_eq!(cm.restricted(&[1, 3]).counts, [[3, 1], [2, 4]]);
    /// ```
    pub fn restricted(&self, classes: &[usize]) -> ConfusionMatrix {
        let keep: Vec<usize> = classes.iter().copied().filter(|&c| c < self.classes()).collect();
        let counts = keep.iter().map(|&t| keep.iter().map(|&p| self.counts[t][p]).collect());
        ConfusionMatrix { counts: counts.collect() }
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
}
