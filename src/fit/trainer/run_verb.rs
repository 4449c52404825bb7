//! The run: [`Trainer::fit`], for a network with the run's loss or a step of one's own
//! ([`RunStep`]), with the dev-run, overfit and sharding settings applied to the loaders for
//! the run and put back after it.
use tch::nn::VarStore;

use super::{run_control, Trainer};
use crate::data::{DataLoader, Dataset};
use crate::fit::outcome::FitReport;
use crate::fit::run::{run, Model};
use crate::train::{Optimizer, RunStep};
use crate::Result;

/// The run.
impl Trainer<'_> {
    /// Trains `model` (its variables in `vs`, updated by `opt`) on `train`, validating on `val`
    /// after every epoch. The model is a network (`&net`: its forward pass on the batch's
    /// images, the run's [`loss`](Self::loss)) or a step of one's own (`&step as &dyn
    /// TrainStep`: its [`train_step`](crate::train::TrainStep::train_step), and its
    /// [`eval_step`](crate::train::TrainStep::eval_step) at validation; the run's loss is then not used), for
    /// a model of several inputs ([`Dataset::extra_inputs`]) or a loss that needs more than the
    /// output and the target ([`RunStep`]). Either way the run does the rest: DDP over `vs`
    /// (rank 0's weights go to every rank), mixed precision, accumulation, clipping, EMA, the
    /// schedule, logs, metrics, checkpoints, resume and pre-emption; it returns the same report
    /// on every rank. On a CUDA device the loaders deliver pinned batches to it during the run
    /// ([`pin_memory`](Self::pin_memory)); they deliver where they did before once `fit`
    /// returns.
    ///
    /// A step of one's own (Lightning's `training_step` and `validation_step`, burn's
    /// `TrainStep` and `ValidStep`):
    ///
    /// ```no_run
    /// use trainbook::prelude::*;
    /// use trainbook::train::{StepBatch, StepOutput, TrainStep};
    /// use tch::nn;
    /// // A network on the images, whose features meet a second input in the head.
    /// struct TwoInputs<'a> { body: &'a nn::SequentialT, head: &'a nn::Linear }
    /// impl TrainStep for TwoInputs<'_> {
    ///     fn train_step(&self, b: &StepBatch<'_>) -> trainbook::Result<StepOutput> {
    ///         let features = self.body.forward_t(b.images, true);
    ///         let output = self.head.forward(&Tensor::cat(&[&features, &b.extra_inputs[0]], 1));
    ///         Ok(StepOutput { loss: output.cross_entropy_for_logits(b.target), output })
    ///     }
    ///     fn eval_step(&self, b: &StepBatch<'_>) -> trainbook::Result<StepOutput> {
    ///         let features = self.body.forward_t(b.images, false);
    ///         let output = self.head.forward(&Tensor::cat(&[&features, &b.extra_inputs[0]], 1));
    ///         let loss = CrossEntropyLoss::default().per_sample(&output, b.target);
    ///         Ok(StepOutput { loss, output })
    ///     }
    /// }
    /// # fn run<D: Dataset + 'static>(dist: &Dist, mut train: DataLoader<D>, mut val: DataLoader<D>, body: nn::SequentialT, head: nn::Linear, mut vs: VarStore) -> trainbook::Result<()> {
    /// let mut opt = Optimizer::adam(&vs, 1e-3);
    /// let step = TwoInputs { body: &body, head: &head };
    /// Trainer::new(dist).epochs(2).fit(&mut vs, &step as &dyn TrainStep, &mut opt, &mut train, &mut val)?;
    /// # Ok(()) }
    /// ```
    pub fn fit<'m, A: Dataset + 'static, B: Dataset + 'static>(
        &self,
        vs: &mut VarStore,
        model: impl Into<RunStep<'m>>,
        opt: &mut Optimizer,
        train: &mut DataLoader<A>,
        val: &mut DataLoader<B>,
    ) -> Result<FitReport> {
        // A dev run's settings and its scratch folder (removed when dropped).
        let dev = self.cfg.fast_dev_run.map(|n| run_control::dev_run(&self.cfg, n)).transpose()?;
        // overfit_batches: the first batches in order, the loaders' shuffle off for the run.
        let overfit = run_control::overfit(&self.cfg);
        let on = (self.dist.device(), self.cfg.pin_memory);
        let shard =
            (self.cfg.use_distributed_sampler && self.dist.world_size() > 1).then_some(self.dist);
        let lent = run_control::Lent::take((train, val), on, overfit.is_some(), shard);
        let cfg = dev.as_ref().map(|(cfg, _)| cfg).or(overfit.as_ref()).unwrap_or(&self.cfg);
        let report = model.into().with_loss(&self.cfg.loss, |step| {
            run(self.dist, cfg, Model { vs, step, opt }, train, val)
        });
        lent.give_back((train, val));
        report
    }
}
