//! The batch-size finder with the run's settings: [`Trainer::find_batch_size`], for a network
//! or a step of one's own.
use tch::nn::VarStore;

use super::Trainer;
use crate::data::{DataLoader, Dataset};
use crate::train::{find_batch_size_step, BatchSizeFind, BatchSizeFindOptions, Optimizer, RunStep};
use crate::Result;

/// The batch-size finder, run before the training (Lightning's `Tuner.scale_batch_size`).
impl Trainer<'_> {
    /// Lightning's `Tuner.scale_batch_size` with this trainer's device, loss, precision,
    /// channels-last layout and CUDA graph: trains `steps_per_trial` steps at batch sizes from
    /// `init_val` on, doubling while they fit in memory, and returns the largest that fitted,
    /// with every trial's peak memory; the weights, the optimizer, the random generator and the
    /// loader are put back (its batch size too: set it to the answer). One process only (see
    /// [`find_batch_size`](crate::train::find_batch_size)); on the CPU set
    /// [`max_memory`](BatchSizeFindOptions::max_memory). `model` is a network or a step of one's
    /// own ([`RunStep`]).
    ///
    /// ```no_run
    /// use trainbook::prelude::*;
    /// use trainbook::train::BatchSizeFindOptions;
    /// # fn main() -> trainbook::Result<()> {
    /// let dist = Dist::single(Device::cuda_if_available());
    /// let data = Mnist::new("data/mnist", true)?.with_transform(compose![ToTensor]);
    /// let mut loader = DataLoader::new(data, 64);
    /// let mut vs = VarStore::new(dist.device());
    /// let net = MnistNet::new(&vs.root());
    /// let mut opt = Optimizer::adam(&vs, 1e-3);
    /// let find = BatchSizeFindOptions { max_memory: Some(4 << 30), ..Default::default() };
    /// let found = Trainer::new(&dist).find_batch_size(&mut vs, &net, &mut opt, &mut loader, find)?;
    /// loader.set_batch_size(found.batch_size);
    /// # Ok(()) }
    /// ```
    pub fn find_batch_size<'m, D: Dataset + 'static>(
        &self,
        vs: &mut VarStore,
        model: impl Into<RunStep<'m>>,
        opt: &mut Optimizer,
        loader: &mut DataLoader<D>,
        find: BatchSizeFindOptions,
    ) -> Result<BatchSizeFind> {
        let model = model.into();
        self.staged(vs, loader, |vs, loader, opts| {
            model.with_loss(&self.cfg.loss, |step| {
                find_batch_size_step((vs, step), loader, opt, opts, find)
            })
        })
    }
}
