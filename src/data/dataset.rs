//! The `Dataset` trait: a sized collection whose sample `i` is a CHW float tensor and a label
//! (and, for regression or multi-label data, a float target; for a model of several inputs,
//! extra input tensors).
use tch::Tensor;

use crate::transforms::{AugRng, TensorImage};
use crate::Result;

/// A map-style data set, like `torch.utils.data.Dataset` with `__len__` and `__getitem__`.
/// `rng` is the augmentation stream of this sample in this epoch (see
/// [`aug_rng`](crate::transforms::aug_rng)). Loader threads call it concurrently, hence
/// `Send + Sync`.
pub trait Dataset: Send + Sync {
    /// Number of samples (`len(dataset)`).
    fn len(&self) -> usize;
    /// Whether there are no samples.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Sample `index` (`dataset[index]`): the transformed CHW float image and its label.
    /// Errors: an index out of range, or a file that cannot be read or decoded.
    fn get(&self, index: usize, rng: &mut AugRng) -> Result<(TensorImage, i64)>;
    /// The label of sample `index` without loading the image (for class counts and splits).
    /// The data sets of this crate panic for an index out of range.
    fn label(&self, index: usize) -> i64;
    /// Class names, index = label.
    fn classes(&self) -> Vec<String>;
    /// The float target of sample `index` when the data set trains something other than one
    /// class per sample: values to regress to, or a multi-hot vector (1.0 where a label
    /// applies). Every sample's target has the same length; loaders stack them into
    /// [`Batch::targets`](super::Batch::targets) (`[B, T]`). `None` (the default): the targets
    /// are the class labels of [`get`](Self::get).
    fn target(&self, index: usize) -> Option<Vec<f32>> {
        let _ = index;
        None
    }
    /// The model's other inputs for sample `index`, beside its image (a model of several
    /// inputs: an image and a vector of measurements, a second picture of a pair): CPU tensors
    /// of the same count and shapes for every sample, which the loader stacks along a new first
    /// dimension into [`Batch::extra_inputs`](super::Batch::extra_inputs), as torch's
    /// `default_collate` stacks each element of a sample tuple. `rng` is the sample's
    /// augmentation stream after [`get`](Self::get) drew from it (a stream of the seed, the
    /// epoch and the sample alone, whichever thread loads it). A step of one's own
    /// ([`TrainStep`](crate::train::TrainStep)) reads them; the default: none.
    fn extra_inputs(&self, index: usize, rng: &mut AugRng) -> Result<Vec<Tensor>> {
        let _ = (index, rng);
        Ok(Vec::new())
    }
}

/// A shared data set is a data set: an `Arc<D>` can go wherever a `D` can (a
/// [`Relabel`](super::Relabel), a [`DataLoader`](super::DataLoader)) while other code keeps
/// using it.
impl<D: Dataset + ?Sized> Dataset for std::sync::Arc<D> {
    fn len(&self) -> usize {
        (**self).len()
    }
    fn get(&self, index: usize, rng: &mut AugRng) -> Result<(TensorImage, i64)> {
        (**self).get(index, rng)
    }
    fn label(&self, index: usize) -> i64 {
        (**self).label(index)
    }
    fn classes(&self) -> Vec<String> {
        (**self).classes()
    }
    fn target(&self, index: usize) -> Option<Vec<f32>> {
        (**self).target(index)
    }
    fn extra_inputs(&self, index: usize, rng: &mut AugRng) -> Result<Vec<Tensor>> {
        (**self).extra_inputs(index, rng)
    }
}
