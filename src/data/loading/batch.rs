//! [`Batch`], one batch as a [`DataLoader`](crate::data::DataLoader) delivers it: the images,
//! the labels or targets, the model's other inputs, and where each sample came from.
use tch::Tensor;

#[cfg(doc)]
use crate::data::Dataset;

/// One batch. `indices` are the data set indices; `is_padding[k]` marks a repeat that a
/// `DistributedSampler` added to even out the ranks (exact metrics skip those).
#[derive(Debug)]
pub struct Batch {
    /// `[B, C, H, W]` float32 images, on the loader's device.
    pub images: Tensor,
    /// `[B]` int64 class indices.
    pub labels: Tensor,
    /// `[B, T]` float32 targets, on the loader's device, when the data set has them
    /// ([`Dataset::target`]: regression or multi-label data); `None` for class labels.
    pub targets: Option<Tensor>,
    /// The model's other inputs, `[B, ...]` each, on the loader's device, when the data set
    /// gives them ([`Dataset::extra_inputs`]); empty otherwise.
    pub extra_inputs: Vec<Tensor>,
    /// The data set index of each sample.
    pub indices: Vec<usize>,
    /// Whether each sample is a padding repeat (see [`Batch`]).
    pub is_padding: Vec<bool>,
    /// Position of this batch in the epoch (0-based, counting skipped batches).
    pub position: usize,
}

impl Batch {
    /// What the loss compares the model's output with: the float [`targets`](Self::targets)
    /// when the data set has them, else the class [`labels`](Self::labels).
    pub fn target(&self) -> &Tensor {
        self.targets.as_ref().unwrap_or(&self.labels)
    }
    /// Samples in this batch.
    pub fn len(&self) -> usize {
        self.indices.len()
    }
    /// `true` for a batch without samples.
    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }
    /// How many samples of this batch are real (not padding repeats).
    pub fn real_count(&self) -> usize {
        self.is_padding.iter().filter(|p| !**p).count()
    }
}
