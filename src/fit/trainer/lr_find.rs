//! The learning-rate range test with the run's settings: [`Trainer::lr_find`], for a network
//! or a step of one's own.
use tch::nn::VarStore;

use super::Trainer;
use crate::data::{DataLoader, Dataset};
use crate::train::{lr_find_step, LrFind, LrFindOptions, Optimizer, RunStep};
use crate::Result;

/// The learning-rate range test, run before the training (fastai's `lr_find`).
impl Trainer<'_> {
    /// fastai's `lr_find` with this trainer's device, ranks (the model wrapped for data
    /// parallelism, every rank recording the same curve), loss, precision and accumulation:
    /// trains with a rate growing from `find.start_lr` to `find.end_lr`, stops when the
    /// smoothed loss diverges, puts the weights, the optimizer and the random generator back,
    /// and suggests a rate (fastai's `valley`). Nothing is written; plot the curve with
    /// [`lr_find_plot`](crate::figures::lr_find_plot).
    ///
    /// ```no_run
    /// use trainbook::prelude::*;
    /// use trainbook::train::LrFindOptions;
    /// # fn main() -> trainbook::Result<()> {
    /// let dist = Dist::single(Device::Cpu);
    /// let data = Mnist::new("data/mnist", true)?.with_transform(compose![ToTensor]);
    /// let mut loader = DataLoader::new(data, 64);
    /// let mut vs = VarStore::new(Device::Cpu);
    /// let net = MnistNet::new(&vs.root());
    /// let mut opt = Optimizer::adam(&vs, 1e-3);
    /// let found = Trainer::new(&dist).lr_find(&mut vs, &net, &mut opt, &mut loader, LrFindOptions::default())?;
    /// if let Some((lr, _)) = found.suggestion {
    ///     opt.set_lr(lr);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lr_find<'m, D: Dataset + 'static>(
        &self,
        vs: &mut VarStore,
        model: impl Into<RunStep<'m>>,
        opt: &mut Optimizer,
        loader: &mut DataLoader<D>,
        find: LrFindOptions,
    ) -> Result<LrFind> {
        let model = model.into();
        self.staged(vs, loader, |vs, loader, opts| {
            model
                .with_loss(&self.cfg.loss, |step| lr_find_step((vs, step), loader, opt, opts, find))
        })
    }
}
