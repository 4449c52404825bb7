//! The learning-rate range test with the run's settings: [`Trainer::lr_find`].
use tch::nn::{ModuleT, VarStore};

use super::Trainer;
use crate::data::{DataLoader, Dataset};
use crate::train::{lr_find, LrFind, LrFindOptions, Optimizer};
use crate::Result;

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
    pub fn lr_find<D: Dataset + 'static>(
        &self,
        vs: &mut VarStore,
        net: &dyn ModuleT,
        opt: &mut Optimizer,
        loader: &mut DataLoader<D>,
        find: LrFindOptions,
    ) -> Result<LrFind> {
        let loss = &self.cfg.loss;
        self.staged(vs, loader, |vs, loader, opts| {
            lr_find((vs, net), loader, opt, loss, opts, find)
        })
    }
}
