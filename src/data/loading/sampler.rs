//! `DistributedSampler`: which dataset indices each rank sees in an epoch, identical to
//! `torch.utils.data.DistributedSampler` for the same (len, replicas, rank, shuffle, seed,
//! drop_last, epoch). Without `drop_last` the list is padded by repeating it from the start so
//! every rank gets the same count; [`DistributedSampler::is_padding`] tells which are repeats.
use crate::rng::{randperm, TorchGenerator};
use crate::{Error, Result};

/// `torch.utils.data.DistributedSampler`: the indices one rank visits each epoch (see the
/// module documentation); build it with [`new`](Self::new) or [`for_dist`](Self::for_dist).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DistributedSampler {
    dataset_len: usize,
    num_replicas: usize,
    rank: usize,
    shuffle: bool,
    seed: u64,
    drop_last: bool,
    epoch: u64,
}

impl DistributedSampler {
    /// A sampler for `rank` of `num_replicas` over a dataset of `dataset_len` samples, with
    /// torch's defaults: shuffle=true, seed=0, drop_last=false, epoch 0.
    pub fn new(dataset_len: usize, num_replicas: usize, rank: usize) -> Result<Self> {
        if num_replicas == 0 || rank >= num_replicas {
            return Err(Error::InvalidArgument(format!(
                "DistributedSampler: rank {rank} must be in [0, {num_replicas}) and num_replicas > 0"
            )));
        }
        Ok(DistributedSampler {
            dataset_len,
            num_replicas,
            rank,
            shuffle: true,
            seed: 0,
            drop_last: false,
            epoch: 0,
        })
    }

    /// The sampler of this process's rank in `dist` (`DistributedSampler(dataset)` in torch,
    /// which reads the rank and world size from the default process group), torch's defaults.
    ///
    /// ```
    /// # fn main() -> trainbook::Result<()> {
    /// let dist = trainbook::dist::Dist::single(trainbook::tch::Device::Cpu);
    /// let sampler = trainbook::data::DistributedSampler::for_dist(10, &dist).shuffle(false);
    /// assert_eq!(sampler.indices(), (0..10).collect::<Vec<_>>());
    /// # Ok(()) }
    /// ```
    pub fn for_dist(dataset_len: usize, dist: &crate::dist::Dist) -> Self {
        // A Dist's rank is always below its world size (checked when it was created).
        DistributedSampler {
            dataset_len,
            num_replicas: dist.world_size().max(1),
            rank: dist.rank().min(dist.world_size().max(1) - 1),
            shuffle: true,
            seed: 0,
            drop_last: false,
            epoch: 0,
        }
    }

    /// Whether each epoch visits the shard in a fresh random order (torch's default: `true`).
    pub fn shuffle(mut self, shuffle: bool) -> Self {
        self.shuffle = shuffle;
        self
    }
    /// Seed of the shuffle (torch's `seed`, default 0); must be the same on every rank.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }
    /// Drop the tail that does not divide evenly over the ranks instead of padding with
    /// repeats (torch's `drop_last`, default `false`).
    pub fn drop_last(mut self, drop_last: bool) -> Self {
        self.drop_last = drop_last;
        self
    }
    /// Call at the start of every epoch so that each epoch is shuffled differently.
    pub fn set_epoch(&mut self, epoch: u64) {
        self.epoch = epoch;
    }
    /// The epoch set by [`set_epoch`](Self::set_epoch).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }
    /// This sampler's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }
    /// The number of ranks the data set is split over.
    pub fn num_replicas(&self) -> usize {
        self.num_replicas
    }
    /// The length of the data set being split.
    pub fn dataset_len(&self) -> usize {
        self.dataset_len
    }
    /// Whether epochs are shuffled (see [`shuffle`](Self::shuffle)).
    pub fn is_shuffled(&self) -> bool {
        self.shuffle
    }
    /// The seed set with [`seed`](Self::seed).
    pub fn seed_value(&self) -> u64 {
        self.seed
    }

    /// Samples this rank yields per epoch (torch's `num_samples`, `len(sampler)`).
    pub fn len(&self) -> usize {
        let (n, r) = (self.dataset_len, self.num_replicas);
        if self.drop_last && n % r != 0 {
            n / r
        } else {
            n.div_ceil(r)
        }
    }

    /// `true` when this rank gets no samples.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Samples over all ranks per epoch, padding included (torch's `total_size`).
    pub fn total_size(&self) -> usize {
        self.len() * self.num_replicas
    }

    /// The dataset indices of this rank for the current epoch, in order.
    pub fn indices(&self) -> Vec<usize> {
        let order: Vec<usize> = if self.shuffle {
            randperm(self.dataset_len, &mut TorchGenerator::new(self.seed.wrapping_add(self.epoch)))
        } else {
            (0..self.dataset_len).collect()
        };
        if order.is_empty() {
            return Vec::new();
        }
        (0..self.len()).map(|k| order[(self.rank + k * self.num_replicas) % order.len()]).collect()
    }

    /// Whether this rank's `k`-th sample is a padding repeat of an earlier one; exact metrics
    /// count each real sample once by skipping these.
    pub fn is_padding(&self, k: usize) -> bool {
        self.rank + k * self.num_replicas >= self.dataset_len
    }
}

impl IntoIterator for &DistributedSampler {
    type Item = usize;
    type IntoIter = std::vec::IntoIter<usize>;
    fn into_iter(self) -> Self::IntoIter {
        self.indices().into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_partition_the_padded_epoch() {
        let n = 10;
        let samplers: Vec<_> =
            (0..3).map(|r| DistributedSampler::new(n, 3, r).unwrap().seed(7)).collect();
        assert!(samplers.iter().all(|s| s.len() == 4 && s.total_size() == 12));
        let mut all: Vec<usize> = samplers.iter().flat_map(|s| s.indices()).collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all, (0..n).collect::<Vec<_>>());
        let padded: usize =
            samplers.iter().map(|s| (0..s.len()).filter(|&k| s.is_padding(k)).count()).sum();
        assert_eq!(padded, 2);
    }

    #[test]
    fn drop_last_and_bad_rank() {
        let s = DistributedSampler::new(10, 3, 2).unwrap().drop_last(true).shuffle(false);
        assert_eq!(s.indices(), vec![2, 5, 8]);
        assert!(DistributedSampler::new(10, 2, 2).is_err());
        assert!(DistributedSampler::new(0, 2, 1).unwrap().indices().is_empty());
    }
}
