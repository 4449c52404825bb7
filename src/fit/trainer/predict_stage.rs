//! Prediction over a whole loader: [`Trainer::predict`] (the model's outputs for every sample,
//! every rank's share gathered and put in the data set's order, padding repeats left out;
//! Lightning's `trainer.predict`) and [`Trainer::predict_tta`] (test-time augmentation: the
//! softmax probabilities averaged over the batch as it is and its augmented views), both for a
//! network or a step of one's own (the outputs of its `eval_step`; Lightning's `predict_step`).
use std::sync::Arc;

use tch::nn::{ModuleT, VarStore};
use tch::{Device, Kind, Tensor};

use super::Trainer;
use crate::data::{Batch, DataLoader, Dataset};
use crate::train::{task_of, EpochOptions, RunStep, StepBatch, TrainStep};
use crate::{Error, Result};

/// A view of a batch for test-time augmentation: a function of the batch's images
/// (`[N, C, H, W]`, on the model's device, after the run's memory format) giving the images the
/// model sees.
#[derive(Clone)]
pub enum TtaView {
    /// The pictures mirrored left to right (torchvision's `hflip`).
    HorizontalFlip,
    /// A view of one's own.
    Custom(Arc<dyn Fn(&Tensor) -> Tensor + Send + Sync>),
}

impl TtaView {
    fn apply(&self, images: &Tensor) -> Tensor {
        match self {
            TtaView::HorizontalFlip => images.flip([-1]),
            TtaView::Custom(f) => f(images),
        }
    }
}

/// Prediction over a loader, with test-time augmentation (Lightning's `trainer.predict`).
impl Trainer<'_> {
    /// The model's outputs (evaluation mode, no gradients, the run's precision and memory
    /// format) for every sample of `loader`'s data set, in the data set's order, on the CPU,
    /// the same on every rank: each rank predicts its share, then the shares are gathered and
    /// each output put at its sample's index (a `DistributedSampler`'s padding repeats left out).
    /// `model` is a network (the outputs of its forward pass) or a step of one's own
    /// ([`RunStep`]: the outputs of its [`eval_step`](TrainStep::eval_step), which gets the
    /// batch's target and extra inputs as in validation).
    ///
    /// ```no_run
    /// use trainbook::prelude::*;
    /// # fn main() -> trainbook::Result<()> {
    /// let dist = Dist::single(Device::Cpu);
    /// let test = Mnist::new("data/mnist", false)?.with_transform(compose![ToTensor]);
    /// let mut loader = DataLoader::new(test, 1000);
    /// let mut vs = VarStore::new(Device::Cpu);
    /// let net = MnistNet::new(&vs.root());
    /// let logits = Trainer::new(&dist).predict(&mut vs, &net, &mut loader)?; // [10000, 10]
    /// let classes = logits.argmax(1, false);
    /// # Ok(()) }
    /// ```
    pub fn predict<'m, D: Dataset + 'static>(
        &self,
        vs: &mut VarStore,
        model: impl Into<RunStep<'m>>,
        loader: &mut DataLoader<D>,
    ) -> Result<Tensor> {
        self.predicted(vs, model.into(), loader, None)
    }

    /// Test-time augmentation: for every sample, the softmax probabilities (over dimension 1)
    /// of the batch as it is and of each of `views`, averaged with equal weights (fastai's
    /// `tta` averages the views' probabilities too, weighting them against the plain batch by
    /// its `beta`), in the data set's order as [`predict`](Self::predict) gives them.
    pub fn predict_tta<'m, D: Dataset + 'static>(
        &self,
        vs: &mut VarStore,
        model: impl Into<RunStep<'m>>,
        loader: &mut DataLoader<D>,
        views: &[TtaView],
    ) -> Result<Tensor> {
        self.predicted(vs, model.into(), loader, Some(views))
    }

    fn predicted<D: Dataset + 'static>(
        &self,
        vs: &mut VarStore,
        model: RunStep<'_>,
        loader: &mut DataLoader<D>,
        views: Option<&[TtaView]>,
    ) -> Result<Tensor> {
        // A network's outputs are its forward pass alone; a step's, its `eval_step`'s.
        let outputs: Box<Outputs<'_>> = match model {
            RunStep::Net(net) => Box::new(model_outputs(net)),
            RunStep::Own(step) => Box::new(step_outputs(step, loader.dataset())),
        };
        let shares = self
            .staged(vs, loader, |_, loader, opts| predict_share(&*outputs, loader, &opts, views));
        let (indices, outputs) = shares?;
        let n = loader.dataset().len();
        let shape = outputs.size();
        let all_indices = self.dist.all_gather_varlen(&indices)?.to_device(Device::Cpu);
        let all = self.dist.all_gather_varlen(&outputs)?.to_device(Device::Cpu);
        if all_indices.size()[0] != n as i64 {
            return Err(Error::InvalidArgument(format!(
                "predict: the ranks predicted {} samples of a data set of {n} (a sampler that repeats samples?)",
                all_indices.size()[0]
            )));
        }
        // Every output's shape past the first dimension (a rank without samples has none).
        let mut rest: Vec<i64> = shape.get(1..).unwrap_or_default().to_vec();
        if rest.is_empty() {
            rest.push(-1);
        }
        let all = all.view([vec![all_indices.size()[0]], rest.clone()].concat().as_slice());
        let shape_n = [vec![n as i64], all.size()[1..].to_vec()].concat();
        let mut result = Tensor::zeros(shape_n.as_slice(), (all.kind(), Device::Cpu));
        let _ = result.index_copy_(0, &all_indices, &all);
        Ok(result)
    }
}

/// A batch's outputs for the given images (the batch's own, or a view of them), the batch and
/// the stage's options.
type Outputs<'a> = dyn Fn(&Tensor, &Batch, &EpochOptions) -> Result<Tensor> + 'a;

/// The model's outputs in evaluation mode.
fn model_outputs(
    net: &dyn ModuleT,
) -> impl Fn(&Tensor, &Batch, &EpochOptions) -> Result<Tensor> + '_ {
    move |x, _, _| Ok(net.forward_t(x, false))
}

/// The step's evaluation outputs, with the batch's target and extra inputs on the device.
fn step_outputs<'a>(
    step: &'a dyn TrainStep,
    dataset: &dyn Dataset,
) -> impl Fn(&Tensor, &Batch, &EpochOptions) -> Result<Tensor> + 'a {
    let task = task_of(step.task(), dataset);
    move |x, batch, opts| {
        let target = batch.target().to_device(opts.device);
        let extras: Vec<Tensor> =
            batch.extra_inputs.iter().map(|t| t.to_device(opts.device)).collect();
        let inputs = StepBatch { images: x, target: &target, extra_inputs: &extras, task };
        Ok(step.eval_step(&inputs)?.output)
    }
}

/// This rank's predictions: the dataset indices (int64) and the outputs (or the averaged
/// probabilities with `views`) of its real samples, on the CPU.
fn predict_share<D: Dataset + 'static>(
    outputs_of: &Outputs<'_>,
    loader: &mut DataLoader<D>,
    opts: &EpochOptions,
    views: Option<&[TtaView]>,
) -> Result<(Tensor, Tensor)> {
    let (mut indices, mut outputs) = (Vec::new(), Vec::new());
    for batch in loader.iter() {
        let batch = batch?;
        let keep: Vec<i64> =
            (0..batch.len() as i64).filter(|&k| !batch.is_padding[k as usize]).collect();
        indices.extend(keep.iter().map(|&k| batch.indices[k as usize] as i64));
        let keep = Tensor::from_slice(&keep).to_device(opts.device);
        let x = opts.batch_images(&batch.images);
        let out = opts.precision.run(opts.device, || {
            tch::no_grad(|| -> Result<Tensor> {
                let forward = |x: &Tensor| -> Result<Tensor> {
                    Ok(outputs_of(x, &batch, opts)?.index_select(0, &keep))
                };
                match views {
                    None => forward(&x),
                    Some(views) => {
                        let p = |x: &Tensor| -> Result<Tensor> {
                            Ok(forward(x)?.softmax(1, Kind::Float))
                        };
                        let mut sum = p(&x)?;
                        for v in views {
                            sum += p(&v.apply(&x))?;
                        }
                        Ok(sum / (views.len() + 1) as f64)
                    }
                }
            })
        })??;
        outputs.push(out.to_device(Device::Cpu));
    }
    let outputs = if outputs.is_empty() {
        Tensor::zeros([0], (Kind::Float, Device::Cpu))
    } else {
        Tensor::cat(&outputs, 0)
    };
    Ok((Tensor::from_slice(&indices), outputs))
}
