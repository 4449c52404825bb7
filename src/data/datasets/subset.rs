//! `Subset` and `random_split`, like `torch.utils.data.Subset` and
//! `torch.utils.data.random_split`: a view of some indices of a shared data set, and a split of
//! a data set into non-overlapping subsets drawn with torch's exact permutation for a seed.
//!
//! `random_split(Arc::new(ds), [800, 200], seed)` gives the same indices as
//! `random_split(ds, [800, 200], generator=torch.Generator().manual_seed(seed))`, and fractions
//! (`[0.8, 0.2]`) are turned into lengths by torch's rule: floor each, then hand out the
//! remainder one by one, round-robin from the first split.
use std::sync::Arc;

use crate::data::Dataset;
use crate::rng::{randperm, TorchGenerator};
use crate::transforms::{AugRng, TensorImage};
use crate::{Error, Result};

/// The samples `indices` of a shared data set, in that order (`torch.utils.data.Subset`):
/// sample `i` of the subset is sample `indices[i]` of the data set, with its label and classes.
///
/// ```
/// use std::sync::Arc;
/// use trainbook::data::{Dataset, Subset, TensorDataset};
/// use trainbook::tch::{Device, Kind, Tensor};
/// # fn main() -> trainbook::Result<()> {
/// let images = Tensor::zeros([5, 1, 2, 2], (Kind::Float, Device::Cpu));
/// let labels = Tensor::from_slice(&[0i64, 1, 0, 1, 1]);
/// let data = Arc::new(TensorDataset::new(&images, &labels, vec!["a".into(), "b".into()])?);
/// let odd = Subset::new(data.clone(), [1, 3])?;
/// assert_eq!((odd.len(), odd.label(0), odd.label(1)), (2, 1, 1));
/// assert!(Subset::new(data, [7]).is_err()); // index 7 of 5 samples
/// # Ok(()) }
/// ```
pub struct Subset<D: Dataset + ?Sized> {
    dataset: Arc<D>,
    indices: Vec<usize>,
}

impl<D: Dataset + ?Sized> Clone for Subset<D> {
    fn clone(&self) -> Self {
        Subset { dataset: self.dataset.clone(), indices: self.indices.clone() }
    }
}

impl<D: Dataset + ?Sized> std::fmt::Debug for Subset<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Subset({} of {} samples)", self.indices.len(), self.dataset.len())
    }
}

impl<D: Dataset + ?Sized> Subset<D> {
    /// A view of `indices` of `dataset` (repeats allowed, as in torch). Errors:
    /// [`Error::InvalidArgument`] naming the first index that is not below `dataset.len()`
    /// (torch only fails when that sample is read).
    pub fn new(dataset: Arc<D>, indices: impl IntoIterator<Item = usize>) -> Result<Subset<D>> {
        let indices: Vec<usize> = indices.into_iter().collect();
        let len = dataset.len();
        if let Some((k, i)) = indices.iter().enumerate().find(|(_, &i)| i >= len) {
            return Err(Error::InvalidArgument(format!(
                "Subset: index {i} (at position {k}) is out of range for a data set of {len} samples"
            )));
        }
        Ok(Subset { dataset, indices })
    }

    /// The indices into the full data set, in subset order (torch's `subset.indices`).
    pub fn indices(&self) -> &[usize] {
        &self.indices
    }

    /// The full data set (torch's `subset.dataset`).
    pub fn dataset(&self) -> &Arc<D> {
        &self.dataset
    }
}

impl<D: Dataset + ?Sized> Dataset for Subset<D> {
    fn len(&self) -> usize {
        self.indices.len()
    }
    fn get(&self, index: usize, rng: &mut AugRng) -> Result<(TensorImage, i64)> {
        let inner = self.indices.get(index).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "Subset index {index} out of range ({} samples)",
                self.indices.len()
            ))
        })?;
        self.dataset.get(*inner, rng)
    }
    /// The label of `self.indices()[index]`; panics for an index out of range, like the other
    /// data sets' `label`.
    fn label(&self, index: usize) -> i64 {
        self.dataset.label(self.indices[index])
    }
    fn classes(&self) -> Vec<String> {
        self.dataset.classes()
    }
    fn target(&self, index: usize) -> Option<Vec<f32>> {
        self.indices.get(index).and_then(|&i| self.dataset.target(i))
    }
    fn extra_inputs(&self, index: usize, rng: &mut AugRng) -> Result<Vec<tch::Tensor>> {
        match self.indices.get(index) {
            Some(&inner) => self.dataset.extra_inputs(inner, rng),
            None => Ok(Vec::new()),
        }
    }
}

/// The sizes of the parts of a [`random_split`]: sample counts, or fractions of the data set
/// (torch accepts both in `lengths`). Build it from an array, slice or `Vec` of `usize`
/// (counts) or `f64` (fractions).
#[derive(Clone, Debug, PartialEq)]
pub enum SplitLengths {
    /// Samples in each part; they must add up to the data set's length.
    Counts(Vec<usize>),
    /// Fractions of the data set, each in `[0, 1]`, adding up to 1 (within torch's
    /// `math.isclose` tolerance, and not above 1).
    Fractions(Vec<f64>),
}

impl From<Vec<usize>> for SplitLengths {
    fn from(v: Vec<usize>) -> Self {
        SplitLengths::Counts(v)
    }
}
impl From<&[usize]> for SplitLengths {
    fn from(v: &[usize]) -> Self {
        SplitLengths::Counts(v.to_vec())
    }
}
impl<const N: usize> From<[usize; N]> for SplitLengths {
    fn from(v: [usize; N]) -> Self {
        SplitLengths::Counts(v.to_vec())
    }
}
impl From<Vec<f64>> for SplitLengths {
    fn from(v: Vec<f64>) -> Self {
        SplitLengths::Fractions(v)
    }
}
impl From<&[f64]> for SplitLengths {
    fn from(v: &[f64]) -> Self {
        SplitLengths::Fractions(v.to_vec())
    }
}
impl<const N: usize> From<[f64; N]> for SplitLengths {
    fn from(v: [f64; N]) -> Self {
        SplitLengths::Fractions(v.to_vec())
    }
}

impl SplitLengths {
    /// The sample count of each part for a data set of `len` samples, by torch's rules (see
    /// the module documentation). Errors: [`Error::InvalidArgument`] for counts that do not add
    /// up to `len`, a fraction outside `[0, 1]`, or fractions that do not add up to 1.
    ///
    /// ```
    /// use trainbook::data::SplitLengths;
    /// # fn main() -> trainbook::Result<()> {
    /// // floor(10 * 0.33) = 3 each, remainder 1 goes to the first part.
    /// assert_eq!(SplitLengths::from([0.33, 0.33, 0.34]).resolve(10)?, [4, 3, 3]);
    /// assert!(SplitLengths::from([6, 3]).resolve(10).is_err());
    /// # Ok(()) }
    /// ```
    pub fn resolve(&self, len: usize) -> Result<Vec<usize>> {
        let counts = match self {
            SplitLengths::Counts(c) => c.clone(),
            SplitLengths::Fractions(fractions) => {
                let sum: f64 = fractions.iter().sum();
                // Python's math.isclose(sum, 1): relative tolerance 1e-9.
                if !((sum - 1.0).abs() <= 1e-9 * sum.abs().max(1.0) && sum <= 1.0) {
                    return Err(Error::InvalidArgument(format!(
                        "random_split: fractions {fractions:?} add up to {sum}, not 1"
                    )));
                }
                if let Some((i, f)) =
                    fractions.iter().enumerate().find(|(_, f)| !(0.0..=1.0).contains(*f))
                {
                    return Err(Error::InvalidArgument(format!(
                        "random_split: fraction {f} at index {i} is not between 0 and 1"
                    )));
                }
                let mut counts: Vec<usize> =
                    fractions.iter().map(|f| (len as f64 * f).floor() as usize).collect();
                let remainder = len.saturating_sub(counts.iter().sum());
                let parts = counts.len();
                for i in 0..remainder {
                    counts[i % parts] += 1;
                }
                counts
            }
        };
        let total: usize = counts.iter().sum();
        if total != len {
            return Err(Error::InvalidArgument(format!(
                "random_split: lengths {counts:?} add up to {total}, but the data set has {len} samples"
            )));
        }
        Ok(counts)
    }
}

/// Splits `dataset` into non-overlapping [`Subset`]s of the given `lengths` (counts or
/// fractions, see [`SplitLengths`]), with the indices of
/// `torch.utils.data.random_split(dataset, lengths, generator=torch.Generator().manual_seed(seed))`.
/// Errors: lengths that do not fit the data set (see [`SplitLengths::resolve`]).
///
/// ```
/// use std::sync::Arc;
/// use trainbook::data::{random_split, Dataset, TensorDataset};
/// use trainbook::tch::{Device, Kind, Tensor};
/// # fn main() -> trainbook::Result<()> {
/// let images = Tensor::zeros([10, 1, 2, 2], (Kind::Float, Device::Cpu));
/// let labels = Tensor::zeros([10], (Kind::Int64, Device::Cpu));
/// let data = Arc::new(TensorDataset::new(&images, &labels, vec!["a".into()])?);
/// let parts = random_split(data.clone(), [0.8, 0.2], 42)?;
/// assert_eq!((parts[0].len(), parts[1].len()), (8, 2));
/// // torch: random_split(range(10), [3, 7], generator=torch.Generator().manual_seed(42))
/// let parts = random_split(data, [3, 7], 42)?;
/// assert_eq!(parts[0].indices(), [2, 6, 1]);
/// # Ok(()) }
/// ```
pub fn random_split<D: Dataset + ?Sized>(
    dataset: Arc<D>,
    lengths: impl Into<SplitLengths>,
    seed: u64,
) -> Result<Vec<Subset<D>>> {
    random_split_with(dataset, lengths, &mut TorchGenerator::new(seed))
}

/// [`random_split`] drawing from a generator the caller keeps (torch's `generator=g` reused
/// across calls): `g` advances by one `randperm` of the data set's length.
pub fn random_split_with<D: Dataset + ?Sized>(
    dataset: Arc<D>,
    lengths: impl Into<SplitLengths>,
    generator: &mut TorchGenerator,
) -> Result<Vec<Subset<D>>> {
    let counts = lengths.into().resolve(dataset.len())?;
    let order = randperm(dataset.len(), generator);
    let mut offset = 0;
    Ok(counts
        .into_iter()
        .map(|n| {
            let part =
                Subset { dataset: dataset.clone(), indices: order[offset..offset + n].to_vec() };
            offset += n;
            part
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions_follow_torch_rule() {
        let r = |f: &[f64], n| SplitLengths::from(f).resolve(n).unwrap();
        assert_eq!(r(&[0.5, 0.5], 0), [0, 0]);
        assert_eq!(r(&[0.5, 0.5], 1), [1, 0]);
        assert_eq!(r(&[0.3, 0.3, 0.4], 1000), [300, 300, 400]);
        assert_eq!(r(&[0.1; 10], 13), [2, 2, 2, 1, 1, 1, 1, 1, 1, 1]);
        let err = |f: &[f64]| SplitLengths::from(f).resolve(10).unwrap_err().to_string();
        assert!(err(&[0.5, 0.6]).contains("add up to"));
        assert!(err(&[1.5, -0.5]).contains("fraction 1.5 at index 0"));
        assert!(err(&[f64::NAN, 1.0]).contains("add up to NaN"));
        let counts = SplitLengths::from([3, 3]).resolve(7).unwrap_err().to_string();
        assert!(counts.contains("add up to 6") && counts.contains("7 samples"), "{counts}");
    }
}
