//! `RASampler`, the repeated-augmentation sampler of torchvision's classification recipe
//! (`references/classification/sampler.py`, `--ra-sampler`, from DeiT): every index of the
//! epoch's order is repeated `repetitions` times and the list is dealt to the ranks round-robin,
//! so each rank sees a different augmentation of the same picture in the same step.
use crate::rng::{randperm, TorchGenerator};
use crate::{Error, Result};

/// The repeated-augmentation sampler with the reference's semantics, index for index (see the
/// module documentation): the epoch's order is `torch.randperm(len, generator seeded with
/// seed + epoch)` when shuffling, each index repeated `repetitions` times, padded from the start
/// to a multiple of the ranks, dealt round-robin, and cut to `len // 256 * 256 / ranks` indices
/// per rank (the reference's rule, which leaves a data set of fewer than 256 samples with
/// none).
///
/// ```
/// # fn main() -> trainbook::Result<()> {
/// use trainbook::data::RASampler;
/// let sampler = RASampler::new(512, 2, 0, 3)?.shuffle(false);
/// // Rank 0 of 2: 0, 0 (rank 1 has the other copy of 0, and the second copy of 1), 1, 2, 2, ...
/// assert_eq!(&sampler.indices()[..5], [0, 0, 1, 2, 2]);
/// assert_eq!(sampler.len(), 256);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RASampler {
    dataset_len: usize,
    num_replicas: usize,
    rank: usize,
    repetitions: usize,
    shuffle: bool,
    seed: u64,
    epoch: u64,
}

impl RASampler {
    /// `RASampler(dataset, num_replicas, rank, repetitions=...)` with shuffling and seed 0.
    /// Errors ([`Error::InvalidArgument`]): no replicas, a rank outside them, no repetitions,
    /// or a data set too small to pad to a multiple of the ranks (where the reference's
    /// assertion fails).
    pub fn new(
        dataset_len: usize,
        num_replicas: usize,
        rank: usize,
        repetitions: usize,
    ) -> Result<Self> {
        let bad = |m: String| Err(Error::InvalidArgument(format!("RASampler: {m}")));
        if num_replicas == 0 || rank >= num_replicas {
            return bad(format!("rank {rank} must be in [0, {num_replicas}) and num_replicas > 0"));
        }
        if repetitions == 0 {
            return bad("repetitions must be at least 1".into());
        }
        let s = RASampler {
            dataset_len,
            num_replicas,
            rank,
            repetitions,
            shuffle: true,
            seed: 0,
            epoch: 0,
        };
        let repeated = dataset_len * repetitions;
        if s.total_size() - repeated > repeated {
            return bad(format!(
                "{dataset_len} samples x {repetitions} repetitions cannot be padded to {} for \
                 {num_replicas} ranks",
                s.total_size()
            ));
        }
        Ok(s)
    }

    /// The sampler of this process's rank in `dist`, with `repetitions` (the recipe's 3 by
    /// default: `--ra-reps`).
    pub fn for_dist(
        dataset_len: usize,
        dist: &crate::dist::Dist,
        repetitions: usize,
    ) -> Result<Self> {
        RASampler::new(dataset_len, dist.world_size().max(1), dist.rank(), repetitions)
    }

    /// Whether each epoch has a fresh random order (default `true`).
    pub fn shuffle(mut self, shuffle: bool) -> Self {
        self.shuffle = shuffle;
        self
    }
    /// Seed of the shuffle (default 0; the same on every rank).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }
    /// Selects the epoch (call it at the start of every epoch, as with `DistributedSampler`).
    pub fn set_epoch(&mut self, epoch: u64) {
        self.epoch = epoch;
    }
    /// Whether epochs are shuffled.
    pub fn is_shuffled(&self) -> bool {
        self.shuffle
    }

    /// Indices per rank before the cut (the reference's `num_samples`).
    fn num_samples(&self) -> usize {
        (self.dataset_len * self.repetitions).div_ceil(self.num_replicas)
    }
    /// Indices over all ranks after padding (`total_size`).
    fn total_size(&self) -> usize {
        self.num_samples() * self.num_replicas
    }

    /// Indices this rank yields per epoch: `len // 256 * 256 / ranks`, rounded down (the
    /// reference's `num_selected_samples`, its `len()`).
    pub fn len(&self) -> usize {
        ((self.dataset_len / 256 * 256) as f64 / self.num_replicas as f64).floor() as usize
    }
    /// `true` when this rank gets no samples (a data set of fewer than 256 samples).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// This rank's indices for the current epoch, in order.
    pub fn indices(&self) -> Vec<usize> {
        let order: Vec<usize> = if self.shuffle {
            randperm(self.dataset_len, &mut TorchGenerator::new(self.seed.wrapping_add(self.epoch)))
        } else {
            (0..self.dataset_len).collect()
        };
        let mut repeated: Vec<usize> =
            order.iter().flat_map(|&i| std::iter::repeat_n(i, self.repetitions)).collect();
        let pad = self.total_size() - repeated.len();
        repeated.extend_from_within(..pad);
        repeated.into_iter().skip(self.rank).step_by(self.num_replicas).take(self.len()).collect()
    }
}
