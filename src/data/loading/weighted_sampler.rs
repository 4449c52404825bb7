//! `WeightedRandomSampler`: data set indices drawn with replacement, each with probability
//! proportional to its weight, identical to `torch.utils.data.WeightedRandomSampler(weights,
//! num_samples, generator=torch.Generator().manual_seed(seed))` (ATen's multinomial with
//! replacement: the normalised cumulative weights in float64, one 53-bit uniform per draw, a
//! binary search). Like [`SubsetRandomSampler`](super::subset_sampler::SubsetRandomSampler),
//! epoch `k` is torch's k-th iteration of the one generator.
use crate::rng::EpochGenerator;
use crate::{Error, Result};

/// `torch.utils.data.WeightedRandomSampler` with replacement and a seeded generator (see the
/// module documentation): e.g. weights `1 / count(class)` for a balanced draw from skewed data.
/// Give it to [`DataLoader::sampler`](crate::data::DataLoader::sampler).
///
/// ```
/// use trainbook::data::WeightedRandomSampler;
/// let s = WeightedRandomSampler::new(vec![0.1, 0.9, 0.0], 5, 0)?;
/// let drawn = s.indices();
/// assert_eq!(drawn.len(), 5);
/// assert!(drawn.iter().all(|&i| i < 2), "index 2 has weight 0");
/// # Ok::<(), trainbook::Error>(())
/// ```
#[derive(Clone)]
pub struct WeightedRandomSampler {
    /// The normalised cumulative weights, the last one 1 (ATen's `cum_dist`).
    cumulative: Vec<f64>,
    num_samples: usize,
    /// The generator as it stands at the start of the epoch.
    generator: EpochGenerator,
}

impl std::fmt::Debug for WeightedRandomSampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WeightedRandomSampler")
            .field("categories", &self.cumulative.len())
            .field("num_samples", &self.num_samples)
            .field("seed", &self.generator.seed())
            .field("epoch", &self.generator.epoch())
            .finish()
    }
}

impl PartialEq for WeightedRandomSampler {
    fn eq(&self, other: &Self) -> bool {
        let key = |s: &Self| (s.num_samples, s.generator.seed(), s.generator.epoch());
        self.cumulative == other.cumulative && key(self) == key(other)
    }
}

impl WeightedRandomSampler {
    /// `num_samples` indices per epoch from `weights` (one per data set index, not negative,
    /// not all 0), drawn with replacement by a generator seeded with `seed` (its low 32 bits,
    /// as in ATen); epoch 0. Errors name the bad weight or count; `num_samples` 1 is refused
    /// (torch draws a single sample by another algorithm, not reproduced here), and so is
    /// drawing without replacement, which this type does not offer.
    pub fn new(weights: Vec<f64>, num_samples: usize, seed: u64) -> Result<Self> {
        if num_samples < 2 {
            return Err(Error::InvalidArgument(format!(
                "WeightedRandomSampler: num_samples {num_samples} (at least 2 here)"
            )));
        }
        if let Some((i, w)) =
            weights.iter().enumerate().find(|(_, w)| !(w.is_finite() && **w >= 0.0))
        {
            return Err(Error::InvalidArgument(format!(
                "WeightedRandomSampler: weight {i} is {w} (weights must be finite and >= 0)"
            )));
        }
        let mut sum = 0.0f64;
        let mut cumulative: Vec<f64> = weights
            .iter()
            .map(|w| {
                sum += w;
                sum
            })
            .collect();
        if sum <= 0.0 {
            return Err(Error::InvalidArgument(
                "WeightedRandomSampler: the weights sum to 0 (or there are none)".into(),
            ));
        }
        for c in &mut cumulative {
            *c /= sum;
        }
        *cumulative.last_mut().expect("weights are not empty") = 1.0;
        Ok(WeightedRandomSampler { cumulative, num_samples, generator: EpochGenerator::new(seed) })
    }

    /// Selects the epoch: [`indices`](Self::indices) becomes torch's `epoch`-th iteration.
    pub fn set_epoch(&mut self, epoch: u64) {
        let n = self.num_samples;
        self.generator.set_epoch(epoch, |g| {
            for _ in 0..n {
                g.random64();
            }
        });
    }

    /// The epoch set by [`set_epoch`](Self::set_epoch).
    pub fn epoch(&self) -> u64 {
        self.generator.epoch()
    }
    /// Samples per epoch (`len(sampler)`).
    pub fn len(&self) -> usize {
        self.num_samples
    }
    /// Never empty: at least 2 samples per epoch.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// This epoch's data set indices, in order.
    pub fn indices(&self) -> Vec<usize> {
        let mut g = self.generator.at_epoch();
        (0..self.num_samples)
            .map(|_| {
                // at::uniform_real_distribution<double>(0, 1): the low 53 bits of random64.
                let u = (g.random64() & ((1u64 << 53) - 1)) as f64 * (1.0 / (1u64 << 53) as f64);
                // The first bucket whose cumulative weight is not below the draw.
                self.cumulative.partition_point(|&c| c < u)
            })
            .collect()
    }
}
