//! Multiclass precision, recall and F1 ([`MulticlassScore`]), with torchmetrics' definitions
//! and arithmetic: `MulticlassPrecision`, `MulticlassRecall` and `MulticlassF1Score` with
//! `average="micro"`, `"macro"` or `"weighted"` (and `None` as the per-class values), `top_k=1`,
//! `zero_division=0`. The sums are every class's true positive, false positive and false
//! negative counts; the value is computed from them in float32 by the same tensor operations
//! torchmetrics runs, so it is torchmetrics' value bit for bit.
use tch::{Device, Kind, Tensor};

use super::{Metric, Mode};

/// How per-class scores become one number (torchmetrics' `average`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Average {
    /// The score of the counts summed over classes.
    Micro,
    /// The mean of the per-class scores, leaving out a class that is neither present nor
    /// predicted.
    Macro,
    /// The per-class scores weighted by each class's number of samples.
    Weighted,
}

impl Average {
    fn suffix(self) -> &'static str {
        match self {
            Average::Micro => "micro",
            Average::Macro => "macro",
            Average::Weighted => "weighted",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stat {
    Precision,
    Recall,
    F1,
}

/// Multiclass precision, recall or F1 over the arg-max predictions (torchmetrics'
/// `MulticlassPrecision`, `MulticlassRecall`, `MulticlassF1Score`); named `precision_macro`,
/// `recall_weighted`, `f1_micro` and so on after its average.
///
/// ```
/// use trainbook::tch::Tensor;
/// use trainbook::train::{Average, Metric, MulticlassScore};
/// let f1 = MulticlassScore::f1(3);
/// let logits = Tensor::from_slice(&[2.0f32, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 2.0, 0.0]).view([3, 3]);
/// let sums = Vec::<f64>::try_from(f1.batch_sums(&logits, &Tensor::from_slice(&[0i64, 1, 2])))?;
/// // Class 0 right; class 1 predicted twice, present once; class 2 missed: F1 1, 2/3, 0.
/// assert_eq!(f1.per_class(&sums).unwrap(), [1.0, (2.0f32 / 3.0) as f64, 0.0]);
/// assert_eq!(f1.name(), "f1_macro");
/// assert_eq!(MulticlassScore::recall(3).average(Average::Micro).name(), "recall_micro");
/// # Ok::<(), trainbook::tch::TchError>(())
/// ```
#[derive(Clone, Debug)]
pub struct MulticlassScore {
    stat: Stat,
    classes: usize,
    average: Average,
    name: String,
}

impl MulticlassScore {
    fn new(stat: Stat, classes: usize) -> MulticlassScore {
        MulticlassScore { stat, classes, average: Average::Macro, name: String::new() }
            .average(Average::Macro)
    }
    /// Precision, `tp / (tp + fp)`, of `classes` classes, macro-averaged.
    pub fn precision(classes: usize) -> MulticlassScore {
        MulticlassScore::new(Stat::Precision, classes)
    }
    /// Recall, `tp / (tp + fn)`, of `classes` classes, macro-averaged.
    pub fn recall(classes: usize) -> MulticlassScore {
        MulticlassScore::new(Stat::Recall, classes)
    }
    /// F1, `2 tp / (2 tp + fn + fp)`, of `classes` classes, macro-averaged.
    pub fn f1(classes: usize) -> MulticlassScore {
        MulticlassScore::new(Stat::F1, classes)
    }
    /// Averaged as `average` says (the name follows: `f1_weighted`).
    pub fn average(mut self, average: Average) -> MulticlassScore {
        let stat = match self.stat {
            Stat::Precision => "precision",
            Stat::Recall => "recall",
            Stat::F1 => "f1",
        };
        self.average = average;
        self.name = format!("{stat}_{}", average.suffix());
        self
    }

    /// The counts `[tp, fp, fn]` as int64 tensors of one value per class.
    fn counts(&self, sums: &[f64]) -> [Tensor; 3] {
        let c = self.classes;
        let part = |k: usize| {
            let v: Vec<i64> = sums[k * c..(k + 1) * c].iter().map(|&x| x.round() as i64).collect();
            Tensor::from_slice(&v)
        };
        [part(0), part(1), part(2)]
    }

    /// The per-class scores (float32), as torchmetrics computes them.
    fn scores(&self, tp: &Tensor, fp: &Tensor, fn_: &Tensor) -> Tensor {
        match self.stat {
            Stat::Precision => safe_divide(tp, &(tp + fp)),
            Stat::Recall => safe_divide(tp, &(tp + fn_)),
            // torchmetrics' F-beta with beta 1: (1 + 1) tp / ((1 + 1) tp + 1 fn + fp).
            Stat::F1 => {
                let two_tp = tp.to_kind(Kind::Float) * 2.0;
                let denominator = &two_tp + fn_.to_kind(Kind::Float) * 1.0 + fp;
                safe_divide(&two_tp, &denominator)
            }
        }
    }
}

/// `num / denom` in float32 where `denom` is not 0, else 0 (torchmetrics' `_safe_divide`).
pub(crate) fn safe_divide(num: &Tensor, denom: &Tensor) -> Tensor {
    let float =
        |t: &Tensor| if t.is_floating_point() { t.shallow_clone() } else { t.to_kind(Kind::Float) };
    let (num, denom) = (float(num), float(denom));
    let zero = Tensor::zeros([], (num.kind(), num.device()));
    (&num / &denom).where_self(&denom.ne(0.0), &zero)
}

impl Metric for MulticlassScore {
    fn name(&self) -> &str {
        &self.name
    }
    fn mode(&self) -> Mode {
        Mode::Max
    }
    fn sums_len(&self) -> usize {
        3 * self.classes
    }
    fn batch_sums(&self, output: &Tensor, target: &Tensor) -> Tensor {
        let c = self.classes as i64;
        let predicted = output.argmax(1, false).one_hot(c).to_kind(Kind::Bool);
        let truth = target.to_kind(Kind::Int64).one_hot(c).to_kind(Kind::Bool);
        let count = |t: Tensor| t.sum_dim_intlist(0, false, Kind::Double);
        let tp = count(predicted.logical_and(&truth));
        let fp = count(predicted.logical_and(&truth.logical_not()));
        let fn_ = count(predicted.logical_not().logical_and(&truth));
        Tensor::cat(&[tp, fp, fn_], 0)
    }
    fn compute(&self, sums: &[f64]) -> f64 {
        let [tp, fp, fn_] = self.counts(sums);
        let value = match self.average {
            Average::Micro => {
                let (tp, fp, fn_) =
                    (tp.sum(Kind::Int64), fp.sum(Kind::Int64), fn_.sum(Kind::Int64));
                self.scores(&tp, &fp, &fn_)
            }
            Average::Macro | Average::Weighted => {
                let score = self.scores(&tp, &fp, &fn_);
                let weights = if self.average == Average::Weighted {
                    (&tp + &fn_).to_kind(Kind::Float)
                } else {
                    // A class neither present nor predicted does not count in the mean.
                    let absent = (&tp + &fp + &fn_).eq(0);
                    Tensor::ones_like(&score).where_self(&absent.logical_not(), &score.zeros_like())
                };
                safe_divide(&(&weights * &score), &weights.sum_dim_intlist(-1, true, Kind::Float))
                    .sum_dim_intlist(-1, false, Kind::Float)
            }
        };
        value.to_device(Device::Cpu).double_value(&[])
    }
    fn per_class(&self, sums: &[f64]) -> Option<Vec<f64>> {
        let [tp, fp, fn_] = self.counts(sums);
        let scores = self.scores(&tp, &fp, &fn_).to_kind(Kind::Double);
        Vec::<f64>::try_from(scores).ok()
    }
}
