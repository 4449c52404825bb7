//! `TargetTransform`: a data set whose float targets are computed from another data set's
//! labels, as torchvision's `target_transform=` turns a label into what the loss needs (the
//! digit's value as a number for a regression head, a multi-hot vector for a multi-label one).
use std::sync::Arc;

use crate::data::Dataset;
use crate::transforms::{AugRng, TensorImage};
use crate::Result;

/// The function a [`TargetTransform`] applies to each label.
pub type LabelToTarget = dyn Fn(i64) -> Vec<f32> + Send + Sync;

/// `dataset` with a float target computed from every sample's label (torchvision's
/// `target_transform`): images, labels and class names stay the data set's own, and
/// [`Dataset::target`] returns `f(label)`. Every target must have the same length (the loader
/// says which sample differs).
///
/// ```
/// use tch::{Device, Kind, Tensor};
/// use trainbook::data::{Dataset, TargetTransform, TensorDataset};
/// let images = Tensor::zeros([3, 1, 2, 2], (Kind::Float, Device::Cpu));
/// let digits = TensorDataset::new(&images, &Tensor::from_slice(&[7i64, 0, 4]), vec![])?;
/// // The digit's value as a number to regress to.
/// let values = TargetTransform::new(digits, |label| vec![label as f32]);
/// assert_eq!(values.target(0), Some(vec![7.0]));
/// # Ok::<(), trainbook::Error>(())
/// ```
pub struct TargetTransform<D> {
    dataset: D,
    f: Arc<LabelToTarget>,
}

impl<D: Dataset> TargetTransform<D> {
    /// `dataset` whose targets are `f(label)`.
    pub fn new(dataset: D, f: impl Fn(i64) -> Vec<f32> + Send + Sync + 'static) -> Self {
        TargetTransform { dataset, f: Arc::new(f) }
    }

    /// The wrapped data set.
    pub fn inner(&self) -> &D {
        &self.dataset
    }
}

impl<D: Dataset> Dataset for TargetTransform<D> {
    fn len(&self) -> usize {
        self.dataset.len()
    }
    fn get(&self, index: usize, rng: &mut AugRng) -> Result<(TensorImage, i64)> {
        self.dataset.get(index, rng)
    }
    fn label(&self, index: usize) -> i64 {
        self.dataset.label(index)
    }
    fn classes(&self) -> Vec<String> {
        self.dataset.classes()
    }
    fn target(&self, index: usize) -> Option<Vec<f32>> {
        (index < self.dataset.len()).then(|| (self.f)(self.dataset.label(index)))
    }
    fn extra_inputs(&self, index: usize, rng: &mut AugRng) -> Result<Vec<tch::Tensor>> {
        self.dataset.extra_inputs(index, rng)
    }
}
