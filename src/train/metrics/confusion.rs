//! The confusion matrix of a classification's predictions: counts of (true class,
//! predicted class) pairs, per-class recall, and the part of the matrix a plot shows.
use tch::{Kind, Tensor};

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
