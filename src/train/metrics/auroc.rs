//! The multiclass area under the ROC curve over fixed thresholds ([`MulticlassAuroc`]):
//! torchmetrics' `MulticlassAUROC(num_classes, thresholds=T, average="macro")`, whose state is a
//! confusion matrix per threshold and class, so it sums exactly over ranks. (With
//! `thresholds=None` torchmetrics keeps every score instead; that state is not a sum.)
use tch::{Device, Kind, Tensor};

use super::classwise::safe_divide;
use super::{Metric, Mode};

/// One-vs-rest AUROC of every class, macro-averaged, from the ROC curve at `thresholds`
/// evenly spaced thresholds in [0, 1] (torchmetrics' `MulticlassAUROC` with
/// `thresholds=T`): outputs outside [0, 1] are turned into probabilities by a softmax first, as
/// torchmetrics does per batch; the area is the trapezoid rule over the curve, in float32 by
/// the same tensor operations, so the value is torchmetrics' bit for bit. Named `auroc`.
///
/// ```
/// use trainbook::tch::Tensor;
/// use trainbook::train::{Metric, MulticlassAuroc};
/// let auroc = MulticlassAuroc::new(2, 5);
/// // Both samples ranked right for both classes: an area of 1.
/// let logits = Tensor::from_slice(&[3.0f32, 0.0, 0.0, 3.0]).view([2, 2]);
/// let sums = Vec::<f64>::try_from(auroc.batch_sums(&logits, &Tensor::from_slice(&[0i64, 1])))?;
/// assert_eq!(auroc.compute(&sums), 1.0);
/// # Ok::<(), trainbook::tch::TchError>(())
/// ```
#[derive(Clone, Debug)]
pub struct MulticlassAuroc {
    classes: usize,
    thresholds: usize,
}

impl MulticlassAuroc {
    /// AUROC of `classes` classes over `thresholds` thresholds (at least 2; torchmetrics'
    /// examples use 5 to 100s: more is closer to the exact area and keeps more sums).
    pub fn new(classes: usize, thresholds: usize) -> MulticlassAuroc {
        MulticlassAuroc { classes, thresholds: thresholds.max(2) }
    }

    /// The area under each class's curve (float32, one value per class).
    fn areas(&self, sums: &[f64]) -> Tensor {
        let (t, c) = (self.thresholds as i64, self.classes as i64);
        let counts: Vec<i64> = sums.iter().map(|&x| x.round() as i64).collect();
        // [threshold, class, target, predicted], as torchmetrics' state.
        let state = Tensor::from_slice(&counts).view([t, c, 2, 2]);
        let at = |target: i64, predicted: i64| state.select(3, predicted).select(2, target);
        let (tps, fps, fns, tns) = (at(1, 1), at(0, 1), at(1, 0), at(0, 0));
        let tpr = safe_divide(&tps, &(&tps + &fns)).flip([0]).transpose(0, 1);
        let fpr = safe_divide(&fps, &(&fps + &tns)).flip([0]).transpose(0, 1);
        Tensor::trapz(&tpr, &fpr, 1) * 1.0
    }
}

impl Metric for MulticlassAuroc {
    fn name(&self) -> &str {
        "auroc"
    }
    fn mode(&self) -> Mode {
        Mode::Max
    }
    fn sums_len(&self) -> usize {
        self.thresholds * self.classes * 4
    }
    fn batch_sums(&self, output: &Tensor, target: &Tensor) -> Tensor {
        let output = output.to_kind(Kind::Float);
        let outside = output.lt(0.0).logical_or(&output.gt(1.0)).any();
        let probabilities = output.softmax(1, Kind::Float).where_self(&outside, &output);
        let thresholds =
            Tensor::linspace(0.0, 1.0, self.thresholds as i64, (Kind::Float, output.device()));
        // [sample, class, threshold]: the class predicted at that threshold, and present.
        let predicted = probabilities.unsqueeze(-1).ge_tensor(&thresholds.view([1, 1, -1]));
        let truth = target
            .to_kind(Kind::Int64)
            .one_hot(self.classes as i64)
            .to_kind(Kind::Bool)
            .unsqueeze(-1);
        let count = |t: Tensor| t.sum_dim_intlist(0, false, Kind::Double);
        let not_predicted = predicted.logical_not();
        let cells = [
            count(not_predicted.logical_and(&truth.logical_not())),
            count(predicted.logical_and(&truth.logical_not())),
            count(not_predicted.logical_and(&truth)),
            count(predicted.logical_and(&truth)),
        ];
        // [class, threshold, cell] -> [threshold, class, cell].
        Tensor::stack(&cells, -1).transpose(0, 1).contiguous().view([-1])
    }
    fn compute(&self, sums: &[f64]) -> f64 {
        let areas = self.areas(sums);
        let kept = areas.masked_select(&areas.isnan().logical_not());
        kept.mean(Kind::Float).to_device(Device::Cpu).double_value(&[])
    }
    fn per_class(&self, sums: &[f64]) -> Option<Vec<f64>> {
        Vec::<f64>::try_from(self.areas(sums).to_kind(Kind::Double)).ok()
    }
}
