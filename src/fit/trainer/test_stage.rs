//! The test stage: `Trainer::test`, one evaluation with the run's settings (device, precision,
//! channels_last, top-k, loss, the validation batch limit), over every rank's share with exact
//! sums, as `fit` validates; Lightning's `trainer.test`, torchvision's `--test-only`. Also the
//! set-up every stage outside `fit` shares (`staged`).
use tch::nn::VarStore;

use super::{batch_device, Trainer};
use crate::data::{DataLoader, Dataset};
use crate::models::to_channels_last;
use crate::train::{evaluate_step, Ddp, EpochOptions, EpochSummary, RunStep};
use crate::Result;

/// The test stage after the run (Lightning's `trainer.test`).
impl Trainer<'_> {
    /// Evaluates the model's current weights over `loader` as `fit` validates an epoch (the
    /// ranks' shares summed exactly, padding repeats excluded; rank 0's weights on every rank),
    /// without training or writing anything: the test set after a run, or a checkpoint or
    /// pretrained weights on their own. The loader gets its device and batch limit back. `model`
    /// is a network or a step of one's own ([`RunStep`]; its
    /// [`eval_step`](crate::train::TrainStep::eval_step), as `fit` validates).
    ///
    /// ```no_run
    /// use trainbook::prelude::*;
    /// use trainbook::models::load_weights;
    /// # fn main() -> trainbook::Result<()> {
    /// let dist = Dist::single(Device::Cpu);
    /// let test = Mnist::new("data/mnist", false)?.with_transform(compose![ToTensor]);
    /// let mut loader = DataLoader::new(test, 1000);
    /// let mut vs = VarStore::new(Device::Cpu);
    /// let net = MnistNet::new(&vs.root());
    /// load_weights(&mut vs, "runs/mnist/model.safetensors", true)?;
    /// let summary = Trainer::new(&dist).test(&mut vs, &net, &mut loader)?;
    /// println!("test: {summary}");
    /// # Ok(()) }
    /// ```
    pub fn test<'m, D: Dataset + 'static>(
        &self,
        vs: &mut VarStore,
        model: impl Into<RunStep<'m>>,
        loader: &mut DataLoader<D>,
    ) -> Result<EpochSummary> {
        let cfg = &self.cfg;
        cfg.check_counts()?;
        cfg.check_metrics()?;
        let model = model.into();
        let limit = loader.batch_limit();
        loader.set_limit_batches(cfg.limit_val_batches.or(limit));
        let summary = self.staged(vs, loader, |_, loader, opts| {
            model.with_loss(&cfg.loss, |step| evaluate_step(step, loader, &opts))
        });
        loader.set_limit_batches(limit);
        summary
    }

    /// Runs a stage outside `fit` (a test, a prediction, a range test): `stage` gets the model's
    /// variables wrapped for this trainer's ranks (rank 0's weights broadcast; channels_last as
    /// configured), `loader` delivering where a run would, and the run's epoch options.
    pub(super) fn staged<D: Dataset + 'static, T>(
        &self,
        vs: &mut VarStore,
        loader: &mut DataLoader<D>,
        stage: impl FnOnce(&VarStore, &mut DataLoader<D>, EpochOptions) -> Result<T>,
    ) -> Result<T> {
        let cfg = &self.cfg;
        if cfg.channels_last {
            to_channels_last(vs);
        }
        let ddp = Ddp::wrap_with(vs, self.dist, cfg.ddp.clone())?;
        let opts = cfg.epoch_options(self.dist.device(), &ddp);
        let device = loader.batch_device();
        loader.set_device(batch_device(self.dist.device(), cfg.pin_memory, device));
        let result = stage(vs, loader, opts);
        loader.set_device(device);
        result
    }
}
