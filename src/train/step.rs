//! Your own training step ([`TrainStep`]): what one batch's forward pass and loss are, for
//! training and for evaluation, while the loop around it (`train_epoch`, `evaluate`, `fit`)
//! keeps doing the rest: devices, mixed precision, DDP, gradient accumulation, loss scaling,
//! clipping, the optimizer step, EMA, exact metrics, logs, checkpoints, resume and pre-emption.
//! The model-and-loss step every `fit` call used so far is one implementation, [`ModelStep`].
use tch::nn::ModuleT;
use tch::Tensor;

use super::loss::{check_batch, Loss, Task};
use crate::Result;

/// One batch as a step receives it, on the run's device.
#[derive(Debug)]
pub struct StepBatch<'a> {
    /// `[B, C, H, W]` float32 images (channels-last when the run asks for it).
    pub images: &'a Tensor,
    /// What the metrics compare the step's output with:
    /// [`Batch::target`](crate::data::Batch::target) (class indices `[B]`, or float targets).
    pub target: &'a Tensor,
    /// The batch's other inputs ([`Dataset::extra_inputs`](crate::data::Dataset::extra_inputs)),
    /// `[B, ...]` each.
    pub extra_inputs: &'a [Tensor],
    /// The task whose metrics the epoch reports (the step's own, else the data's).
    pub task: Task,
}

impl StepBatch<'_> {
    /// The batch's extra inputs as the struct `T` of one's own (declared with
    /// [`tensor_fields!`](crate::tensor_fields); the data set gave each sample's as
    /// `T::into_tensors`): each field the samples' tensors stacked, `[B, ...]`, on the run's
    /// device. An [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `T` and
    /// its fields when the batch has another number of extra inputs.
    ///
    /// ```
    /// use trainbook::data::TensorFields;
    /// use trainbook::tch::{Device, Kind, Tensor};
    /// use trainbook::train::{StepBatch, Task};
    /// trainbook::tensor_fields! { struct Pair { other: Tensor, distance: Tensor } }
    /// let (images, target) = (Tensor::zeros([2, 1, 2, 2], (Kind::Float, Device::Cpu)), Tensor::from_slice(&[0i64, 1]));
    /// let extra = [Tensor::ones([2, 1, 2, 2], (Kind::Float, Device::Cpu)), Tensor::from_slice(&[0.5f32, 1.5])];
    /// let batch = StepBatch { images: &images, target: &target, extra_inputs: &extra, task: Task::Classification };
    /// let pair: Pair = batch.fields()?;
    /// assert_eq!(pair.distance.size(), [2]);
    /// # Ok::<(), trainbook::Error>(())
    /// ```
    pub fn fields<T: crate::data::TensorFields>(&self) -> Result<T> {
        T::from_tensors(self.extra_inputs.iter().map(Tensor::shallow_clone).collect())
    }
}

/// What a step hands back.
#[derive(Debug)]
pub struct StepOutput {
    /// In training, the batch's mean loss, what backward runs on (a scalar); in evaluation the
    /// loss of each sample (`[B]`), so that the epoch's loss is an exact sum over the real
    /// samples (the padding repeats of a `DistributedSampler` left out).
    pub loss: Tensor,
    /// The model's output for each sample (`[B, ...]`), which the task's metrics (accuracy,
    /// MAE, F1, the run's own metrics) compare with [`StepBatch::target`].
    pub output: Tensor,
}

/// A training step of one's own: the forward pass and the loss of one batch, in training
/// (gradients on, the model in training mode) and in evaluation (called under `no_grad`, the
/// model in evaluation mode). The loop runs backward on the training loss, scaled for
/// accumulation and float16 as usual, inside the run's autocast; everything else stays as
/// `fit` does it. Give one to [`Trainer::fit`](crate::fit::Trainer::fit) (`&step as &dyn
/// TrainStep`, a [`RunStep`]), [`train_epoch_step`](crate::train::train_epoch_step) or
/// [`evaluate_step`](crate::train::evaluate_step).
///
/// A model of two inputs, an image and a vector of measurements that the data set gives as
/// [`extra_inputs`](crate::data::Dataset::extra_inputs):
///
/// ```
/// use tch::nn::{self, Module, ModuleT};
/// use tch::{Device, Kind, Tensor};
/// use trainbook::train::{StepBatch, StepOutput, Task, TrainStep};
/// struct ImageAndMeasurements {
///     image: nn::Sequential,
///     head: nn::Linear,
/// }
/// impl ImageAndMeasurements {
///     fn output(&self, batch: &StepBatch<'_>) -> Tensor {
///         let features = self.image.forward(batch.images);
///         self.head.forward(&Tensor::cat(&[features, batch.extra_inputs[0].shallow_clone()], 1))
///     }
/// }
/// impl TrainStep for ImageAndMeasurements {
///     fn train_step(&self, batch: &StepBatch<'_>) -> trainbook::Result<StepOutput> {
///         let output = self.output(batch);
///         Ok(StepOutput { loss: output.cross_entropy_for_logits(batch.target), output })
///     }
///     fn eval_step(&self, batch: &StepBatch<'_>) -> trainbook::Result<StepOutput> {
///         let output = self.output(batch);
///         let loss = output.log_softmax(1, Kind::Float).nll_loss_nd::<Tensor>(
///             batch.target, None, tch::Reduction::None, -100,
///         );
///         Ok(StepOutput { loss, output })
///     }
/// }
/// let vs = nn::VarStore::new(Device::Cpu);
/// let image = nn::seq().add_fn(|x| x.flatten(1, -1)).add(nn::linear(vs.root(), 12, 4, Default::default()));
/// let step = ImageAndMeasurements { image, head: nn::linear(vs.root(), 4 + 2, 3, Default::default()) };
/// let (images, target) = (Tensor::rand([5, 3, 2, 2], (Kind::Float, Device::Cpu)), Tensor::from_slice(&[0i64, 1, 2, 1, 0]));
/// let measurements = [Tensor::rand([5, 2], (Kind::Float, Device::Cpu))];
/// let batch = StepBatch { images: &images, target: &target, extra_inputs: &measurements, task: Task::Classification };
/// let out = step.eval_step(&batch)?;
/// assert_eq!((out.loss.size(), out.output.size()), (vec![5], vec![5, 3]));
/// # Ok::<(), trainbook::Error>(())
/// ```
pub trait TrainStep {
    /// The task whose metrics the epochs report; `None` (the default): the one the data
    /// implies ([`Task::of_targets`]).
    fn task(&self) -> Option<Task> {
        None
    }
    /// The forward pass and the batch's mean loss, for training.
    fn train_step(&self, batch: &StepBatch<'_>) -> Result<StepOutput>;
    /// The forward pass and the loss of each sample, for evaluation.
    fn eval_step(&self, batch: &StepBatch<'_>) -> Result<StepOutput>;
    /// Where the training loss is a weighted mean (the sum of `eval_step`'s per-sample losses
    /// over the sum of these weights, as torch's cross-entropy with class weights computes
    /// it): each sample's weight `[N]` (float64, on the target's device), so that an epoch's
    /// loss is that weighted mean over all its samples. `None` (the default): a plain mean.
    fn loss_weights(&self, _batch: &StepBatch<'_>) -> Option<Tensor> {
        None
    }
}

/// The step of a model of one input and a [`Loss`]: `model.forward_t(images)`, the shapes
/// checked against the target (an error naming both, not a panic inside the loss), then the
/// loss's batch mean (training) or per-sample losses (evaluation). What `fit` runs when given
/// a model.
///
/// ```
/// use tch::nn::{self, ModuleT};
/// use tch::{Device, Kind, Tensor};
/// use trainbook::train::{CrossEntropyLoss, ModelStep, StepBatch, Task, TrainStep};
/// let vs = nn::VarStore::new(Device::Cpu);
/// let net = nn::seq_t().add_fn(|x| x.flatten(1, -1)).add(nn::linear(vs.root(), 12, 3, Default::default()));
/// let loss = CrossEntropyLoss::default();
/// let step = ModelStep { model: &net, loss: &loss };
/// let (images, target) = (Tensor::rand([4, 3, 2, 2], (Kind::Float, Device::Cpu)), Tensor::from_slice(&[0i64, 1, 2, 1]));
/// let batch = StepBatch { images: &images, target: &target, extra_inputs: &[], task: Task::Classification };
/// let out = step.train_step(&batch)?;
/// assert!(out.loss.equal(&net.forward_t(&images, true).cross_entropy_for_logits(&target)));
/// # Ok::<(), trainbook::Error>(())
/// ```
pub struct ModelStep<'a> {
    /// The model, called on the batch's images.
    pub model: &'a dyn ModuleT,
    /// The loss between its output and the batch's target.
    pub loss: &'a dyn Loss,
}

impl std::fmt::Debug for ModelStep<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelStep").field("task", &self.loss.task()).finish_non_exhaustive()
    }
}

impl TrainStep for ModelStep<'_> {
    fn task(&self) -> Option<Task> {
        self.loss.task()
    }
    fn train_step(&self, batch: &StepBatch<'_>) -> Result<StepOutput> {
        let output = self.model.forward_t(batch.images, true);
        check_batch(batch.task, None, &output, batch.target)?;
        Ok(StepOutput { loss: self.loss.mean(&output, batch.target), output })
    }
    fn eval_step(&self, batch: &StepBatch<'_>) -> Result<StepOutput> {
        let output = self.model.forward_t(batch.images, false);
        check_batch(batch.task, None, &output, batch.target)?;
        Ok(StepOutput { loss: self.loss.per_sample(&output, batch.target), output })
    }
    fn loss_weights(&self, batch: &StepBatch<'_>) -> Option<Tensor> {
        self.loss.sample_weights(batch.target)
    }
}

/// What a [`Trainer`](crate::fit::Trainer) verb (`fit`, `test`, `predict`, `predict_tta`,
/// `lr_find`, `find_batch_size`) runs: a network, trained and evaluated with the run's loss
/// (`&net`, any [`ModuleT`], or a `&dyn ModuleT`), or a step of one's own (`&step as &dyn
/// TrainStep`, or a variable of that type), which brings its own forward pass and loss. Each
/// verb takes `impl Into<RunStep>`, so one function serves both.
///
/// ```
/// use tch::nn::{self, ModuleT};
/// use tch::Device;
/// use trainbook::train::{CrossEntropyLoss, ModelStep, RunStep, TrainStep};
/// let vs = nn::VarStore::new(Device::Cpu);
/// let net = nn::seq_t().add_fn(|x| x.flatten(1, -1)).add(nn::linear(vs.root(), 12, 3, Default::default()));
/// assert!(matches!(RunStep::from(&net), RunStep::Net(_)));
/// let loss = CrossEntropyLoss::default();
/// let own = ModelStep { model: &net, loss: &loss };
/// assert!(matches!(RunStep::from(&own as &dyn TrainStep), RunStep::Own(_)));
/// ```
#[derive(Clone, Copy)]
pub enum RunStep<'a> {
    /// A network on the batch's images, with the run's loss ([`ModelStep`]).
    Net(&'a dyn ModuleT),
    /// A step of one's own.
    Own(&'a dyn TrainStep),
}

impl RunStep<'_> {
    /// Calls `f` with the step this stands for: the network with `loss`, or the step itself.
    pub(crate) fn with_loss<R>(&self, loss: &dyn Loss, f: impl FnOnce(&dyn TrainStep) -> R) -> R {
        match *self {
            RunStep::Net(model) => f(&ModelStep { model, loss }),
            RunStep::Own(step) => f(step),
        }
    }
}

impl std::fmt::Debug for RunStep<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RunStep::Net(_) => "RunStep::Net(..)",
            RunStep::Own(_) => "RunStep::Own(..)",
        })
    }
}

impl<'a, M: ModuleT> From<&'a M> for RunStep<'a> {
    fn from(net: &'a M) -> RunStep<'a> {
        RunStep::Net(net)
    }
}

impl<'a> From<&'a dyn ModuleT> for RunStep<'a> {
    fn from(net: &'a dyn ModuleT) -> RunStep<'a> {
        RunStep::Net(net)
    }
}

impl<'a> From<&'a dyn TrainStep> for RunStep<'a> {
    fn from(step: &'a dyn TrainStep) -> RunStep<'a> {
        RunStep::Own(step)
    }
}
