//! `SubsetRandomSampler`: a fresh random order of a fixed list of data set indices every
//! epoch, identical to `torch.utils.data.SubsetRandomSampler(indices,
//! generator=torch.Generator().manual_seed(seed))`.
//!
//! torch's sampler keeps one generator and draws `randperm(len(indices))` from it on every
//! iteration, so its k-th iteration (0-based) continues where the previous ones left the
//! generator. Epoch `k` here is that k-th iteration, whichever epochs were visited before: the
//! sampler replays the generator up to the epoch it is set to.
use crate::rng::{randperm, skip_randperm, EpochGenerator};

/// `torch.utils.data.SubsetRandomSampler` with a seeded generator (see the module
/// documentation). Give it to [`DataLoader::sampler`](crate::data::DataLoader::sampler) to load the
/// indices in its order; [`DataLoader::set_epoch`](crate::data::DataLoader::set_epoch) selects the
/// epoch.
///
/// ```
/// use trainbook::data::SubsetRandomSampler;
/// let mut sampler = SubsetRandomSampler::new([10, 20, 30, 40, 50], 0);
/// // torch: s = SubsetRandomSampler([10, 20, 30, 40, 50], generator=torch.Generator().manual_seed(0))
/// assert_eq!(sampler.indices(), [50, 10, 20, 40, 30]); // list(s), first time
/// sampler.set_epoch(1);
/// assert_eq!(sampler.indices(), [40, 50, 10, 20, 30]); // list(s), second time
/// ```
#[derive(Clone)]
pub struct SubsetRandomSampler {
    indices: Vec<usize>,
    /// The generator as it stands at the start of the epoch.
    generator: EpochGenerator,
}

impl std::fmt::Debug for SubsetRandomSampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubsetRandomSampler")
            .field("len", &self.indices.len())
            .field("seed", &self.generator.seed())
            .field("epoch", &self.generator.epoch())
            .finish()
    }
}

impl PartialEq for SubsetRandomSampler {
    fn eq(&self, other: &Self) -> bool {
        let key = |s: &Self| (s.generator.seed(), s.generator.epoch());
        self.indices == other.indices && key(self) == key(other)
    }
}

impl SubsetRandomSampler {
    /// A sampler over `indices` (data set indices, repeats allowed) whose generator is
    /// `torch.Generator().manual_seed(seed)` (only the low 32 bits of `seed` count, as in
    /// ATen); epoch 0.
    pub fn new(indices: impl IntoIterator<Item = usize>, seed: u64) -> SubsetRandomSampler {
        SubsetRandomSampler {
            indices: indices.into_iter().collect(),
            generator: EpochGenerator::new(seed),
        }
    }

    /// Selects the epoch: [`indices`](Self::indices) becomes torch's `epoch`-th iteration
    /// (0-based). Moving forward costs one generator pass per skipped epoch; moving back
    /// replays from the seed.
    pub fn set_epoch(&mut self, epoch: u64) {
        let n = self.indices.len();
        self.generator.set_epoch(epoch, |g| skip_randperm(n, g));
    }

    /// The epoch set by [`set_epoch`](Self::set_epoch).
    pub fn epoch(&self) -> u64 {
        self.generator.epoch()
    }
    /// The seed given to [`new`](Self::new).
    pub fn seed_value(&self) -> u64 {
        self.generator.seed()
    }
    /// The indices sampled from, in the order given (torch's `sampler.indices`).
    pub fn subset_indices(&self) -> &[usize] {
        &self.indices
    }
    /// Samples per epoch (`len(sampler)`).
    pub fn len(&self) -> usize {
        self.indices.len()
    }
    /// `true` when there is nothing to sample.
    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }

    /// This epoch's data set indices, in order: `indices[i] for i in randperm(len(indices))`.
    pub fn indices(&self) -> Vec<usize> {
        let mut generator = self.generator.at_epoch();
        randperm(self.indices.len(), &mut generator).into_iter().map(|i| self.indices[i]).collect()
    }
}

impl IntoIterator for &SubsetRandomSampler {
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
    fn epochs_replay_in_any_order() {
        let mut s = SubsetRandomSampler::new((0..50).map(|i| i * 3), 9);
        let forward: Vec<Vec<usize>> = (0..4)
            .map(|e| {
                s.set_epoch(e);
                s.indices()
            })
            .collect();
        let mut t = SubsetRandomSampler::new((0..50).map(|i| i * 3), 9);
        t.set_epoch(3);
        assert_eq!(t.indices(), forward[3]);
        t.set_epoch(1);
        assert_eq!(t.indices(), forward[1]);
        assert_ne!(forward[0], forward[1]);
        let mut sorted = forward[2].clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..50).map(|i| i * 3).collect::<Vec<_>>());
        assert!(SubsetRandomSampler::new([], 0).indices().is_empty());
    }
}
