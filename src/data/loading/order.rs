//! The order in which a [`DataLoader`](crate::data::DataLoader) visits its data set each epoch:
//! the [`Sampler`] trait (torch's `torch.utils.data.Sampler`), torch's two default orders
//! ([`SequentialSampler`], [`RandomSampler`]) and the trait's implementations for the crate's
//! samplers. A sampler of one's own implements the trait and is handed to
//! [`DataLoader::sampler`](crate::data::DataLoader::sampler).
use crate::data::{DistributedSampler, RASampler, SubsetRandomSampler, WeightedRandomSampler};
use crate::rng::{randperm, TorchGenerator};

/// Which data set indices a loader visits in an epoch, and in which order (torch's
/// `torch.utils.data.Sampler`, with `set_epoch` as `DistributedSampler` has it). The loader
/// asks for [`epoch_indices`](Self::epoch_indices) once per epoch, after
/// [`set_epoch`](Self::set_epoch), and cuts the indices into batches; the order must be a pure
/// function of the sampler's settings and the epoch, so that a resumed run (which skips the
/// batches it already trained) sees the same batches. Under DDP a sampler gives each rank its
/// own share (as [`DistributedSampler`] does): every rank must get the same number of batches.
///
/// ```
/// use trainbook::data::{DataLoader, Sampler, TensorDataset};
/// use trainbook::tch::{Device, Kind, Tensor};
///
/// /// The data set backwards, the even indices only.
/// #[derive(Debug)]
/// struct EvenBackwards(usize);
///
/// impl Sampler for EvenBackwards {
///     fn epoch_indices(&self) -> Vec<(usize, bool)> {
///         (0..self.0).rev().filter(|i| i % 2 == 0).map(|i| (i, false)).collect()
///     }
/// }
///
/// # fn main() -> trainbook::Result<()> {
/// let x = Tensor::zeros([6, 1, 2, 2], (Kind::Float, Device::Cpu));
/// let y = Tensor::zeros([6], (Kind::Int64, Device::Cpu));
/// let mut loader = DataLoader::new(TensorDataset::new(&x, &y, vec![])?, 2)
///     .sampler(EvenBackwards(6))
///     .num_workers(0);
/// let seen: Vec<usize> = loader.iter().flat_map(|b| b.unwrap().indices).collect();
/// assert_eq!(seen, [4, 2, 0]);
/// # Ok(()) }
/// ```
pub trait Sampler: Send + Sync + std::fmt::Debug {
    /// This epoch's data set indices in visiting order, each with whether it is a padding
    /// repeat (a [`DistributedSampler`] repeats samples so every rank gets as many; a repeat
    /// trains but is not counted twice in the epoch's metrics).
    fn epoch_indices(&self) -> Vec<(usize, bool)>;

    /// Samples per epoch, padding included (`len(sampler)`); by default
    /// [`epoch_indices`](Self::epoch_indices)'s length.
    fn num_samples(&self) -> usize {
        self.epoch_indices().len()
    }

    /// The epoch whose order [`epoch_indices`](Self::epoch_indices) gives next (torch's
    /// `sampler.set_epoch(epoch)`; the loader calls it from its own `set_epoch`). By default
    /// the order does not depend on the epoch.
    fn set_epoch(&mut self, _epoch: u64) {}

    /// Whether each epoch's order is a fresh random one (by default, no).
    fn is_shuffled(&self) -> bool {
        false
    }

    /// The loader's [`shuffle`](crate::data::DataLoader::shuffle) setting, for a sampler that
    /// has one (a [`DistributedSampler`], an [`RASampler`]); by default ignored.
    fn set_shuffle(&mut self, _shuffle: bool) {}

    /// The loader's [`seed`](crate::data::DataLoader::seed), for a sampler that takes it (a
    /// [`DistributedSampler`], an [`RASampler`], the loader's own shuffle); by default ignored.
    fn set_seed(&mut self, _seed: u64) {}

    /// The sampler as a [`DistributedSampler`], when it is one (what
    /// [`DataLoader::distributed_sampler`](crate::data::DataLoader::distributed_sampler) gives).
    fn as_distributed(&self) -> Option<&DistributedSampler> {
        None
    }
}

/// The indices `0..len` in order (torch's `SequentialSampler`; a loader's order by default).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SequentialSampler {
    len: usize,
}

impl SequentialSampler {
    /// The indices of a data set of `len` samples, in order.
    pub fn new(len: usize) -> SequentialSampler {
        SequentialSampler { len }
    }
}

impl Sampler for SequentialSampler {
    fn epoch_indices(&self) -> Vec<(usize, bool)> {
        (0..self.len).map(|i| (i, false)).collect()
    }
    fn num_samples(&self) -> usize {
        self.len
    }
}

/// A fresh permutation of `0..len` each epoch (torch's `RandomSampler` without replacement, a
/// loader's `shuffle=True`): torch's `randperm` from a generator seeded with `seed + epoch`, the
/// permutation of a one-replica [`DistributedSampler`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RandomSampler {
    len: usize,
    seed: u64,
    epoch: u64,
}

impl RandomSampler {
    /// Permutations of `0..len` seeded with `seed` (plus the epoch).
    pub fn new(len: usize, seed: u64) -> RandomSampler {
        RandomSampler { len, seed, epoch: 0 }
    }
}

impl Sampler for RandomSampler {
    fn epoch_indices(&self) -> Vec<(usize, bool)> {
        let mut g = TorchGenerator::new(self.seed.wrapping_add(self.epoch));
        randperm(self.len, &mut g).into_iter().map(|i| (i, false)).collect()
    }
    fn num_samples(&self) -> usize {
        self.len
    }
    fn set_epoch(&mut self, epoch: u64) {
        self.epoch = epoch;
    }
    fn is_shuffled(&self) -> bool {
        true
    }
    fn set_seed(&mut self, seed: u64) {
        self.seed = seed;
    }
}

impl Sampler for DistributedSampler {
    fn epoch_indices(&self) -> Vec<(usize, bool)> {
        self.indices().into_iter().enumerate().map(|(k, i)| (i, self.is_padding(k))).collect()
    }
    fn num_samples(&self) -> usize {
        self.len()
    }
    fn set_epoch(&mut self, epoch: u64) {
        DistributedSampler::set_epoch(self, epoch);
    }
    fn is_shuffled(&self) -> bool {
        DistributedSampler::is_shuffled(self)
    }
    fn set_shuffle(&mut self, shuffle: bool) {
        *self = self.clone().shuffle(shuffle);
    }
    fn set_seed(&mut self, seed: u64) {
        *self = self.clone().seed(seed);
    }
    fn as_distributed(&self) -> Option<&DistributedSampler> {
        Some(self)
    }
}

impl Sampler for SubsetRandomSampler {
    fn epoch_indices(&self) -> Vec<(usize, bool)> {
        self.indices().into_iter().map(|i| (i, false)).collect()
    }
    fn num_samples(&self) -> usize {
        self.len()
    }
    fn set_epoch(&mut self, epoch: u64) {
        SubsetRandomSampler::set_epoch(self, epoch);
    }
    fn is_shuffled(&self) -> bool {
        true
    }
}

impl Sampler for WeightedRandomSampler {
    fn epoch_indices(&self) -> Vec<(usize, bool)> {
        self.indices().into_iter().map(|i| (i, false)).collect()
    }
    fn num_samples(&self) -> usize {
        self.len()
    }
    fn set_epoch(&mut self, epoch: u64) {
        WeightedRandomSampler::set_epoch(self, epoch);
    }
    fn is_shuffled(&self) -> bool {
        true
    }
}

impl Sampler for RASampler {
    /// The repeats are the point, not padding: each counts in the epoch's metrics.
    fn epoch_indices(&self) -> Vec<(usize, bool)> {
        self.indices().into_iter().map(|i| (i, false)).collect()
    }
    fn num_samples(&self) -> usize {
        self.len()
    }
    fn set_epoch(&mut self, epoch: u64) {
        RASampler::set_epoch(self, epoch);
    }
    fn is_shuffled(&self) -> bool {
        RASampler::is_shuffled(self)
    }
    fn set_shuffle(&mut self, shuffle: bool) {
        *self = self.clone().shuffle(shuffle);
    }
    fn set_seed(&mut self, seed: u64) {
        *self = self.clone().seed(seed);
    }
}
