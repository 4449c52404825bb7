//! `DataLoader`: batches of `(images [B, C, H, W] f32, labels [B] i64)` from a [`Dataset`] in
//! sampler order, decoded and augmented by worker threads with bounded prefetch, delivered in
//! a stable order whatever the thread count. Errors from workers (with the file name) end the
//! iteration as an `Err` item instead of a panic.
use std::sync::Arc;

use tch::Device;

use super::batches::{Batches, Plans};
use super::order::{RandomSampler, Sampler, SequentialSampler};
#[cfg(doc)]
use crate::data::SubsetRandomSampler;
use crate::data::{Dataset, DistributedSampler};
use crate::transforms::MixUpCutMix;

/// `torch.utils.data.DataLoader`: batches of a [`Dataset`] in the order of a shuffle, a
/// [`DistributedSampler`] or sequence, prepared by worker threads (see the module docs).
///
/// ```
/// use trainbook::data::{DataLoader, TensorDataset};
/// use trainbook::tch::{Device, Kind, Tensor};
/// # fn main() -> trainbook::Result<()> {
/// let images = Tensor::rand([10, 1, 4, 4], (Kind::Float, Device::Cpu));
/// let labels = Tensor::zeros([10], (Kind::Int64, Device::Cpu));
/// let data = TensorDataset::new(&images, &labels, vec!["a".into()])?;
/// let mut loader = DataLoader::new(data, 4).shuffle(true).num_workers(0);
/// let sizes: Vec<usize> = loader.iter().map(|b| b.map(|b| b.len())).collect::<Result<_, _>>()?;
/// assert_eq!(sizes, [4, 4, 2]);
/// # Ok(()) }
/// ```
pub struct DataLoader<D: Dataset> {
    dataset: Arc<D>,
    batch_size: usize,
    drop_last: bool,
    /// The sampler that orders each epoch: the loader's own (sequential, or shuffled with its
    /// seed) unless [`sampler`](Self::sampler) or [`distributed`](Self::distributed) gave one.
    order: Box<dyn Sampler>,
    /// Whether `order` is the loader's own sequential or shuffled order.
    own_order: bool,
    num_workers: usize,
    prefetch: usize,
    seed: u64,
    epoch: u64,
    device: Device,
    skip: usize,
    limit: Option<usize>,
    mix: Option<Arc<MixUpCutMix>>,
}

impl<D: Dataset + 'static> DataLoader<D> {
    /// Sequential order, `drop_last=false`, one worker per core, seed 0, CPU.
    pub fn new(dataset: D, batch_size: usize) -> DataLoader<D> {
        Self::from_arc(Arc::new(dataset), batch_size)
    }

    /// A loader over a data set shared with other loaders or code.
    pub fn from_arc(dataset: Arc<D>, batch_size: usize) -> DataLoader<D> {
        let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
        let order = Box::new(SequentialSampler::new(dataset.len()));
        DataLoader {
            dataset,
            batch_size: batch_size.max(1),
            drop_last: false,
            order,
            own_order: true,
            num_workers: workers,
            prefetch: 2,
            seed: 0,
            mix: None,
            epoch: 0,
            device: Device::Cpu,
            skip: 0,
            limit: None,
        }
    }

    /// `shuffle=True`: a fresh permutation each epoch (seeded by [`seed`](Self::seed) and the
    /// epoch). On a [`distributed`](Self::distributed) loader it sets the sampler's shuffle; a
    /// [`SubsetRandomSampler`] is kept (it always shuffles).
    pub fn shuffle(mut self, shuffle: bool) -> Self {
        self.set_shuffle(shuffle);
        self
    }

    /// Whether each epoch visits the data in a fresh random order (a shuffle, or a sampler that
    /// shuffles).
    pub fn is_shuffled(&self) -> bool {
        self.order.is_shuffled()
    }

    /// [`shuffle`](Self::shuffle) on a loader in place (a [`SubsetRandomSampler`] always
    /// shuffles; a sampler of one's own gets [`Sampler::set_shuffle`]).
    pub fn set_shuffle(&mut self, shuffle: bool) {
        if !self.own_order {
            self.order.set_shuffle(shuffle);
            return;
        }
        let len = self.dataset.len();
        self.order = if shuffle {
            Box::new(RandomSampler::new(len, self.seed))
        } else {
            Box::new(SequentialSampler::new(len))
        };
        self.order.set_epoch(self.epoch);
    }

    /// Shards the data set over the ranks of `dist`: this rank visits its part of every epoch,
    /// as with `DataLoader(dataset, sampler=DistributedSampler(dataset, shuffle=...,
    /// seed=...))` in torch. The shuffle setting and the seed carry over, whichever order the
    /// builder calls come in; a world of one sees the whole data set. It replaces a
    /// [`SubsetRandomSampler`]: to shard part of a data set, build the loader over a
    /// [`Subset`](crate::data::Subset) instead.
    ///
    /// ```
    /// use trainbook::data::{DataLoader, TensorDataset};
    /// use trainbook::dist::Dist;
    /// use trainbook::tch::{Device, Kind, Tensor};
    /// # fn main() -> trainbook::Result<()> {
    /// let dist = Dist::single(Device::Cpu);
    /// let images = Tensor::zeros([10, 1, 2, 2], (Kind::Float, Device::Cpu));
    /// let labels = Tensor::zeros([10], (Kind::Int64, Device::Cpu));
    /// let data = TensorDataset::new(&images, &labels, vec!["zero".into()])?;
    /// let loader = DataLoader::new(data, 4).shuffle(true).seed(7).distributed(&dist);
    /// assert_eq!(loader.num_samples(), 10);
    /// assert_eq!(loader.len(), 3);
    /// # Ok(()) }
    /// ```
    pub fn distributed(mut self, dist: &crate::dist::Dist) -> Self {
        let shuffle = (self.own_order && self.order.is_shuffled())
            || self.order.as_distributed().is_some_and(DistributedSampler::is_shuffled);
        let sampler =
            DistributedSampler::for_dist(self.dataset.len(), dist).shuffle(shuffle).seed(self.seed);
        self.order = Box::new(sampler);
        self.own_order = false;
        self
    }
    /// Sample `index` of the data set as this loader delivers it in its current epoch: the
    /// data set's picture and label with the augmentation draws of the loader's seed, that
    /// epoch and that index (whichever worker loads it), before batching and batch mixing.
    /// Errors: as the data set's, and an index past its end.
    pub fn sample(&self, index: usize) -> crate::Result<(crate::transforms::TensorImage, i64)> {
        if index >= self.dataset.len() {
            return Err(crate::Error::InvalidArgument(format!(
                "DataLoader::sample: index {index} of a data set of {}",
                self.dataset.len()
            )));
        }
        let (image, label, _) =
            super::batch_assembly::load_sample(&*self.dataset, index, (self.seed, self.epoch))?;
        Ok((image, label))
    }
    /// Whether the loader visits the data in its own order ([`shuffle`](Self::shuffle) or not),
    /// neither [`distributed`](Self::distributed) nor given a [`sampler`](Self::sampler): under
    /// several ranks every rank would visit the whole data set.
    pub fn uses_own_order(&self) -> bool {
        self.own_order
    }
    /// [`distributed`](Self::distributed) in place, on a loader in its own order; returns
    /// whether it sharded it (`fit` under several ranks: `use_distributed_sampler`).
    pub(crate) fn shard_own_order(&mut self, dist: &crate::dist::Dist) -> bool {
        if !self.own_order {
            return false;
        }
        let shuffle = self.order.is_shuffled();
        let sampler =
            DistributedSampler::for_dist(self.dataset.len(), dist).shuffle(shuffle).seed(self.seed);
        self.order = Box::new(sampler);
        self.order.set_epoch(self.epoch);
        self.own_order = false;
        true
    }
    /// Undoes [`shard_own_order`](Self::shard_own_order): the loader's own order again, shuffled
    /// or not.
    pub(crate) fn unshard(&mut self, shuffle: bool) {
        self.own_order = true;
        self.set_shuffle(shuffle);
    }
    /// Visit the data in `sampler`'s order (torch's `sampler=`): a [`DistributedSampler`], a
    /// [`SubsetRandomSampler`], an [`RASampler`](crate::data::RASampler), a
    /// [`WeightedRandomSampler`](crate::data::WeightedRandomSampler), or a [`Sampler`] of one's
    /// own. Its epoch follows [`set_epoch`](Self::set_epoch); a `SubsetRandomSampler` keeps its
    /// own seed.
    ///
    /// ```
    /// use trainbook::data::{DataLoader, SubsetRandomSampler, TensorDataset};
    /// use trainbook::tch::{Device, Kind, Tensor};
    /// # fn main() -> trainbook::Result<()> {
    /// let images = Tensor::zeros([10, 1, 2, 2], (Kind::Float, Device::Cpu));
    /// let labels = Tensor::zeros([10], (Kind::Int64, Device::Cpu));
    /// let data = TensorDataset::new(&images, &labels, vec!["zero".into()])?;
    /// let sampler = SubsetRandomSampler::new([1, 3, 5, 7], 0);
    /// let mut loader = DataLoader::new(data, 3).sampler(sampler.clone()).num_workers(0);
    /// let mut seen = Vec::new();
    /// for batch in loader.iter() {
    ///     seen.extend(batch?.indices);
    /// }
    /// assert_eq!(seen, sampler.indices());
    /// # Ok(()) }
    /// ```
    pub fn sampler(mut self, sampler: impl Sampler + 'static) -> Self {
        self.order = Box::new(sampler);
        self.own_order = false;
        self
    }
    /// Drop the last batch when it is smaller than the batch size (torch's `drop_last`).
    pub fn drop_last(mut self, drop_last: bool) -> Self {
        self.drop_last = drop_last;
        self
    }
    /// Threads that decode and augment; 0 loads in the calling thread.
    pub fn num_workers(mut self, n: usize) -> Self {
        self.num_workers = n;
        self
    }
    /// Batches each worker may prepare ahead of the consumer (torch's `prefetch_factor`).
    pub fn prefetch_factor(mut self, n: usize) -> Self {
        self.prefetch = n.max(1);
        self
    }
    /// Seed of the shuffle (also a distributed sampler's) and of the augmentations.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self.order.set_seed(seed);
        self
    }
    /// Mixes every batch with MixUp or CutMix ([`MixUpCutMix`], torchvision's
    /// `--mixup-alpha` / `--cutmix-alpha`: `v2.RandomChoice([v2.MixUp(..), v2.CutMix(..)])` in
    /// the loader's `collate_fn`), in the worker that finishes it: the batch's
    /// [`targets`](crate::data::Batch::targets) become class probabilities and its labels their most probable
    /// class. Each batch's draws are a pure function of the seed, the epoch, its position and its
    /// first sample ([`batch_rng`](crate::transforms::batch_rng)): the same with any number of
    /// workers and after a resume.
    pub fn batch_mix(mut self, mix: MixUpCutMix) -> Self {
        self.mix = Some(Arc::new(mix));
        self
    }
    /// Sets or removes the batch mixing (see [`batch_mix`](Self::batch_mix)).
    pub fn set_batch_mix(&mut self, mix: Option<MixUpCutMix>) {
        self.mix = mix.map(Arc::new);
    }
    /// The batch mixing, if any.
    pub fn batch_mixing(&self) -> Option<&MixUpCutMix> {
        self.mix.as_deref()
    }
    /// Where batches are delivered; CUDA batches are staged in pinned memory and copied
    /// asynchronously.
    pub fn device(mut self, device: Device) -> Self {
        self.device = device;
        self
    }
    /// Changes where the next iterations deliver batches (see [`device`](Self::device)).
    pub fn set_device(&mut self, device: Device) {
        self.device = device;
    }
    /// Where batches are delivered (the CPU unless [`device`](Self::device) said otherwise).
    pub fn batch_device(&self) -> Device {
        self.device
    }

    /// Selects the epoch (shuffle permutation, sampler epoch and augmentations).
    pub fn set_epoch(&mut self, epoch: u64) {
        self.epoch = epoch;
        self.order.set_epoch(epoch);
    }
    /// The epoch set by [`set_epoch`](Self::set_epoch).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }
    /// Skips the first `batches` batches of the next iteration (to resume mid-epoch).
    pub fn skip_batches(&mut self, batches: usize) {
        self.skip = batches;
    }
    /// At most `batches` batches per epoch, the first ones of its order (Lightning's
    /// `limit_train_batches` / `limit_val_batches` as a count): for a quick look or a debug run.
    /// Under a [`DistributedSampler`] every rank takes `batches` of its own shard.
    ///
    /// ```
    /// use tch::{Device, Kind, Tensor};
    /// use trainbook::data::{DataLoader, TensorDataset};
    /// let x = Tensor::zeros([40, 1, 2, 2], (Kind::Float, Device::Cpu));
    /// let y = Tensor::zeros([40], (Kind::Int64, Device::Cpu));
    /// let mut loader = DataLoader::new(TensorDataset::new(&x, &y, vec![])?, 4).limit_batches(3);
    /// assert_eq!((loader.len(), loader.iter().count()), (3, 3));
    /// # Ok::<(), trainbook::Error>(())
    /// ```
    pub fn limit_batches(mut self, batches: usize) -> Self {
        self.limit = Some(batches);
        self
    }
    /// Sets or clears ([`None`]) the limit of [`limit_batches`](Self::limit_batches).
    pub fn set_limit_batches(&mut self, batches: Option<usize>) {
        self.limit = batches;
    }
    /// The limit of [`limit_batches`](Self::limit_batches), if any.
    pub fn batch_limit(&self) -> Option<usize> {
        self.limit
    }
    /// Batches the next iteration skips ([`skip_batches`](Self::skip_batches); 0 once an
    /// iteration has started).
    pub fn batches_to_skip(&self) -> usize {
        self.skip
    }
    /// The data set.
    pub fn dataset(&self) -> &D {
        &self.dataset
    }
    /// Samples per batch (the last one may be smaller).
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }
    /// Sets the samples per batch (at least 1) from the next iteration on (what a
    /// [batch-size finder](crate::train::find_batch_size) tries, and what it found).
    pub fn set_batch_size(&mut self, batch_size: usize) {
        self.batch_size = batch_size.max(1);
    }
    /// The sampler, when the loader is [`distributed`](Self::distributed) or has one.
    pub fn distributed_sampler(&self) -> Option<&DistributedSampler> {
        self.order.as_distributed()
    }

    /// This epoch's sample order with each position's padding flag.
    fn epoch_order(&self) -> Vec<(usize, bool)> {
        self.order.epoch_indices()
    }

    /// Samples per epoch seen by this loader (padding included).
    pub fn num_samples(&self) -> usize {
        self.order.num_samples()
    }

    /// Batches per epoch (`len(loader)`; at most the [`limit_batches`](Self::limit_batches)).
    pub fn len(&self) -> usize {
        let n = self.num_samples();
        let batches =
            if self.drop_last { n / self.batch_size } else { n.div_ceil(self.batch_size) };
        self.limit.map_or(batches, |limit| batches.min(limit))
    }
    /// `true` when an epoch yields no batch.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Iterates over this epoch's batches (after any [`skip_batches`](Self::skip_batches)).
    pub fn iter(&mut self) -> Batches {
        let order = self.epoch_order();
        let mut plans: Plans = order.chunks(self.batch_size).map(<[_]>::to_vec).collect();
        if self.drop_last && plans.last().is_some_and(|b| b.len() < self.batch_size) {
            plans.pop();
        }
        if let Some(limit) = self.limit {
            plans.truncate(limit);
        }
        let skip = std::mem::take(&mut self.skip);
        let dataset = self.dataset.clone() as Arc<dyn Dataset>;
        let (workers, stream) = ((self.num_workers, self.prefetch), (self.seed, self.epoch));
        Batches::start(dataset, plans, skip, workers, stream, (self.device, self.mix.clone()))
    }
}
