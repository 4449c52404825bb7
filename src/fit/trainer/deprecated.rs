//! The `x_step` twins of the trainer's verbs, kept for one release: each verb now takes a
//! network or a step of one's own ([`RunStep`]), so `fit_step(vs, &step, ..)` is
//! `fit(vs, &step as &dyn TrainStep, ..)`. Each twin calls its verb.
use tch::nn::VarStore;
use tch::Tensor;

use super::{Trainer, TtaView};
use crate::data::{DataLoader, Dataset};
use crate::fit::outcome::FitReport;
use crate::train::{
    BatchSizeFind, BatchSizeFindOptions, EpochSummary, LrFind, LrFindOptions, Optimizer, RunStep,
    TrainStep,
};
use crate::Result;

/// The twins of the verbs for a step of one's own.
impl Trainer<'_> {
    /// [`fit`](Self::fit) with a step of one's own; `fit` takes one now.
    #[deprecated(note = "use Trainer::fit(vs, &step as &dyn TrainStep, ..)")]
    pub fn fit_step<A: Dataset + 'static, B: Dataset + 'static>(
        &self,
        vs: &mut VarStore,
        step: &dyn TrainStep,
        opt: &mut Optimizer,
        train: &mut DataLoader<A>,
        val: &mut DataLoader<B>,
    ) -> Result<FitReport> {
        self.fit(vs, RunStep::Own(step), opt, train, val)
    }

    /// [`test`](Self::test) with a step of one's own; `test` takes one now.
    #[deprecated(note = "use Trainer::test(vs, &step as &dyn TrainStep, ..)")]
    pub fn test_step<D: Dataset + 'static>(
        &self,
        vs: &mut VarStore,
        step: &dyn TrainStep,
        loader: &mut DataLoader<D>,
    ) -> Result<EpochSummary> {
        self.test(vs, RunStep::Own(step), loader)
    }

    /// [`predict`](Self::predict) with a step of one's own; `predict` takes one now.
    #[deprecated(note = "use Trainer::predict(vs, &step as &dyn TrainStep, ..)")]
    pub fn predict_step<D: Dataset + 'static>(
        &self,
        vs: &mut VarStore,
        step: &dyn TrainStep,
        loader: &mut DataLoader<D>,
    ) -> Result<Tensor> {
        self.predict(vs, RunStep::Own(step), loader)
    }

    /// [`predict_tta`](Self::predict_tta) with a step of one's own; `predict_tta` takes one now.
    #[deprecated(note = "use Trainer::predict_tta(vs, &step as &dyn TrainStep, ..)")]
    pub fn predict_step_tta<D: Dataset + 'static>(
        &self,
        vs: &mut VarStore,
        step: &dyn TrainStep,
        loader: &mut DataLoader<D>,
        views: &[TtaView],
    ) -> Result<Tensor> {
        self.predict_tta(vs, RunStep::Own(step), loader, views)
    }

    /// [`lr_find`](Self::lr_find) with a step of one's own; `lr_find` takes one now.
    #[deprecated(note = "use Trainer::lr_find(vs, &step as &dyn TrainStep, ..)")]
    pub fn lr_find_step<D: Dataset + 'static>(
        &self,
        vs: &mut VarStore,
        step: &dyn TrainStep,
        opt: &mut Optimizer,
        loader: &mut DataLoader<D>,
        find: LrFindOptions,
    ) -> Result<LrFind> {
        self.lr_find(vs, RunStep::Own(step), opt, loader, find)
    }

    /// [`find_batch_size`](Self::find_batch_size) with a step of one's own;
    /// `find_batch_size` takes one now.
    #[deprecated(note = "use Trainer::find_batch_size(vs, &step as &dyn TrainStep, ..)")]
    pub fn find_batch_size_step<D: Dataset + 'static>(
        &self,
        vs: &mut VarStore,
        step: &dyn TrainStep,
        opt: &mut Optimizer,
        loader: &mut DataLoader<D>,
        find: BatchSizeFindOptions,
    ) -> Result<BatchSizeFind> {
        self.find_batch_size(vs, RunStep::Own(step), opt, loader, find)
    }
}
