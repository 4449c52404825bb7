//! The order in which a [`DataLoader`](crate::data::DataLoader) visits its data set each epoch:
//! in sequence, shuffled, or by one of the samplers (torch's `sampler=`).
use crate::data::{DistributedSampler, RASampler, SubsetRandomSampler, WeightedRandomSampler};

/// The order in which a loader visits the data set each epoch.
#[derive(Clone, Debug)]
pub enum Order {
    /// Indices `0..len` in order (`shuffle=False`).
    Sequential,
    /// `shuffle=True`: torch's `randperm` seeded with `seed + epoch` (the same permutation as a
    /// one-replica `DistributedSampler`).
    Shuffle,
    /// This rank's share, in the sampler's order (`sampler=DistributedSampler(...)`).
    Distributed(DistributedSampler),
    /// A fixed list of indices in a fresh random order each epoch
    /// (`sampler=SubsetRandomSampler(indices, generator=...)`).
    SubsetRandom(SubsetRandomSampler),
    /// This rank's share with repeated augmentation (`sampler=RASampler(...)`, torchvision's
    /// `--ra-sampler`).
    RepeatedAugmentation(RASampler),
    /// Indices drawn with replacement by weight (`sampler=WeightedRandomSampler(...)`).
    Weighted(WeightedRandomSampler),
}

impl From<WeightedRandomSampler> for Order {
    fn from(sampler: WeightedRandomSampler) -> Order {
        Order::Weighted(sampler)
    }
}

impl From<RASampler> for Order {
    fn from(sampler: RASampler) -> Order {
        Order::RepeatedAugmentation(sampler)
    }
}

impl From<DistributedSampler> for Order {
    fn from(sampler: DistributedSampler) -> Order {
        Order::Distributed(sampler)
    }
}

impl From<SubsetRandomSampler> for Order {
    fn from(sampler: SubsetRandomSampler) -> Order {
        Order::SubsetRandom(sampler)
    }
}
