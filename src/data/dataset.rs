//! The `Dataset` trait: a sized collection whose sample `i` is a CHW float tensor and a label.
use crate::transforms::{AugRng, TensorImage};
use crate::Result;

/// A map-style data set, like `torch.utils.data.Dataset` with `__len__` and `__getitem__`.
/// `rng` is the augmentation stream of this sample in this epoch (see `transforms::aug_rng`).
pub trait Dataset: Send + Sync {
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn get(&self, index: usize, rng: &mut AugRng) -> Result<(TensorImage, i64)>;
    /// The label of sample `index` without loading the image (for class counts and splits).
    fn label(&self, index: usize) -> i64;
    /// Class names, index = label.
    fn classes(&self) -> Vec<String>;
}
