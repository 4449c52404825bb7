//! Losses as one trait, [`Loss`]: cross-entropy for class indices, MSE, L1, Huber and smooth L1
//! for float targets, BCE-with-logits for multi-hot targets, or any closure. Each gives the
//! batch mean that backward uses (torch's `reduction="mean"`, the same kernel) and the
//! per-sample losses that the exact epoch sums are made of, and says which [`Task`] it trains,
//! which decides the metrics an epoch reports.
use std::sync::Arc;

use tch::{Kind, Tensor};

mod cross_entropy;
mod multi_label;
mod regression;

pub use cross_entropy::CrossEntropyLoss;
pub use multi_label::BCEWithLogitsLoss;
pub use regression::{HuberLoss, L1Loss, MSELoss, SmoothL1Loss};

/// What a model is trained to predict, which decides the metrics an epoch reports beside the
/// loss: accuracy for classes, MAE and RMSE for numbers, per-label F1 for sets of labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Task {
    /// One class per sample: int64 class indices `[N]`, logits `[N, C]`; accuracy (arg-max
    /// equals the label).
    Classification,
    /// Float targets `[N, T]` (or `[N]`), outputs of the same shape; mean absolute error and
    /// root mean squared error over every target value (torchmetrics' `MeanAbsoluteError`,
    /// `MeanSquaredError(squared=False)`).
    Regression,
    /// Multi-hot float targets `[N, L]` (1 where a label applies), logits `[N, L]`; a label is
    /// predicted where its logit is above 0 (probability above 0.5); F1 per label and their
    /// mean (torchmetrics' `MultilabelF1Score(average=None / "macro")`).
    MultiLabel,
}

impl Task {
    /// The task a data set's targets imply: float targets
    /// ([`Dataset::target`](crate::data::Dataset::target) gives a value) are regression, class
    /// labels classification.
    pub fn of_targets(float_targets: bool) -> Task {
        if float_targets {
            Task::Regression
        } else {
            Task::Classification
        }
    }
}

/// A training loss: per-sample losses and their batch mean, for the model's `output` and the
/// batch's `target` (class indices `[N]` for classification, float `[N, T]` or `[N]` otherwise:
/// see [`Batch::target`](crate::data::Batch::target)).
///
/// A closure `|output, target| -> per-sample losses [N]` is a `Loss` too; its task is the one
/// the data implies ([`Task::of_targets`]).
///
/// ```
/// use tch::{Device, Kind, Tensor};
/// use trainbook::train::{Loss, MSELoss, Task};
/// let out = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 5.0]).view([4, 1]);
/// let target = Tensor::ones([4, 1], (Kind::Float, Device::Cpu));
/// assert_eq!(MSELoss.mean(&out, &target).double_value(&[]), (0.0 + 1.0 + 4.0 + 16.0) / 4.0);
/// // A closure: squared error, in per-sample form.
/// let mine = |o: &Tensor, t: &Tensor| (o - t).square().view([-1]);
/// assert!(mine.mean(&out, &target).equal(&MSELoss.mean(&out, &target)));
/// assert_eq!((MSELoss.task(), mine.task()), (Some(Task::Regression), None));
/// ```
pub trait Loss: Send + Sync {
    /// Per-sample losses `[N]` (for each sample, the mean over its target values).
    fn per_sample(&self, output: &Tensor, target: &Tensor) -> Tensor;
    /// The mean loss of the batch, what backward uses. The default averages
    /// [`per_sample`](Self::per_sample); the built-in losses call torch's `reduction="mean"`
    /// kernel, so their value is torch's bit for bit.
    fn mean(&self, output: &Tensor, target: &Tensor) -> Tensor {
        self.per_sample(output, target).mean(None::<Kind>)
    }
    /// The task this loss trains; `None` (the default, and closures): the one the data implies.
    fn task(&self) -> Option<Task> {
        None
    }
    /// For a loss whose batch mean weighs its samples (torch's `reduction="mean"` with a class
    /// `weight` or an `ignore_index`: the sum of the per-sample losses divided by the sum of the
    /// samples' weights), each sample's weight `[N]` in float64 on the target's device, so that
    /// an epoch's loss is the same weighted mean over all its samples. `None` (the default):
    /// every sample weighs 1.
    fn sample_weights(&self, _target: &Tensor) -> Option<Tensor> {
        None
    }
}

impl<F> Loss for F
where
    F: Fn(&Tensor, &Tensor) -> Tensor + Send + Sync,
{
    fn per_sample(&self, output: &Tensor, target: &Tensor) -> Tensor {
        self(output, target)
    }
}

/// Any [`Loss`] behind a shared pointer, for settings that are cloned and printed (a
/// [`FitConfig`](crate::fit::FitConfig)'s `loss`): printed as its type's name.
///
/// ```
/// use trainbook::train::{Loss, MSELoss, SharedLoss};
/// let loss = SharedLoss::new(MSELoss);
/// assert_eq!(format!("{loss:?}"), "SharedLoss(trainbook::train::loss::regression::MSELoss)");
/// ```
#[derive(Clone)]
pub struct SharedLoss {
    loss: Arc<dyn Loss>,
    name: &'static str,
}

impl SharedLoss {
    /// Shares `loss`.
    pub fn new<L: Loss + 'static>(loss: L) -> SharedLoss {
        SharedLoss { loss: Arc::new(loss), name: std::any::type_name::<L>() }
    }
}

impl std::fmt::Debug for SharedLoss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SharedLoss({})", self.name)
    }
}

impl Loss for SharedLoss {
    fn per_sample(&self, output: &Tensor, target: &Tensor) -> Tensor {
        self.loss.per_sample(output, target)
    }
    fn mean(&self, output: &Tensor, target: &Tensor) -> Tensor {
        self.loss.mean(output, target)
    }
    fn task(&self) -> Option<Task> {
        self.loss.task()
    }
    fn sample_weights(&self, target: &Tensor) -> Option<Tensor> {
        self.loss.sample_weights(target)
    }
}

/// Per-sample means of an element-wise loss `[N, ...]` (a 1-D loss is per-sample already).
pub(crate) fn mean_per_sample(elementwise: Tensor) -> Tensor {
    if elementwise.dim() <= 1 {
        elementwise
    } else {
        let n = elementwise.size()[0];
        elementwise.reshape([n, -1]).mean_dim(1, false, None::<Kind>)
    }
}

/// Checks that a batch's `output` and `target` fit `task`, and a top-k count the number of
/// classes (shapes are host metadata: no device read). torch broadcasts mismatched shapes in
/// `mse_loss` with a warning; here it is an error naming both shapes.
pub(crate) fn check_batch(
    task: Task,
    top_k: Option<usize>,
    output: &Tensor,
    target: &Tensor,
) -> crate::Result<()> {
    let (o, t) = (output.size(), target.size());
    if let (Some(k), Task::Classification, [_, classes]) = (top_k, task, o.as_slice()) {
        if k == 0 || k as i64 > *classes {
            return Err(crate::Error::InvalidArgument(format!(
                "top-k accuracy with k = {k}: the model has {classes} classes (k must be 1 to {classes})"
            )));
        }
    }
    let ok = match task {
        // Class indices, or class probabilities (as torch's cross-entropy takes them).
        Task::Classification => {
            (o.len() == 2 && t.len() == 1 && o[0] == t[0] && target.kind() == Kind::Int64)
                || (o.len() == 2 && o == t && target.is_floating_point())
        }
        Task::Regression | Task::MultiLabel => o == t,
    };
    if ok {
        Ok(())
    } else {
        Err(crate::Error::InvalidArgument(format!(
            "{task:?}: the model's output {o:?} does not fit the batch's target {t:?} ({:?}); {}",
            target.kind(),
            match task {
                Task::Classification => {
                    "expected logits [N, C] and int64 class indices [N] (or float class \
                     probabilities [N, C])"
                }
                _ => "expected the same shape (a regression head of T outputs for T targets)",
            }
        )))
    }
}
