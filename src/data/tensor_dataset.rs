//! `TensorDataset`: samples already in memory as a `[N, C, H, W]` float tensor with `[N]`
//! labels (like `torch.utils.data.TensorDataset`), for quick experiments and benchmarks.
use tch::{Device, Kind, Tensor};

use super::Dataset;
use crate::transforms::{AugRng, TensorImage};
use crate::{Error, Result};

/// In-memory images and labels, like `torch.utils.data.TensorDataset(images, labels)`: sample
/// `i` is `images[i]` (no transform, `rng` unused) with label `labels[i]`.
pub struct TensorDataset {
    images: Vec<f32>,
    shape: [usize; 3],
    labels: Vec<i64>,
    classes: Vec<String>,
}

impl TensorDataset {
    /// Copies `images` (`[N, C, H, W]`, any kind, stored as float32) and `labels` (`[N]`, any
    /// integer kind) to host memory; `classes` are the class names, index = label. Errors:
    /// [`Error::InvalidArgument`] for other shapes.
    pub fn new(images: &Tensor, labels: &Tensor, classes: Vec<String>) -> Result<TensorDataset> {
        let size = images.size();
        if size.len() != 4 || labels.size() != [size[0]] {
            return Err(Error::InvalidArgument(format!(
                "TensorDataset: images {size:?} and labels {:?} (expected [N,C,H,W] and [N])",
                labels.size()
            )));
        }
        let images: Vec<f32> = Vec::try_from(
            images.to_device(Device::Cpu).to_kind(Kind::Float).contiguous().view([-1]),
        )?;
        let labels: Vec<i64> = Vec::try_from(labels.to_device(Device::Cpu).to_kind(Kind::Int64))?;
        Ok(TensorDataset {
            images,
            shape: [size[1] as usize, size[2] as usize, size[3] as usize],
            labels,
            classes,
        })
    }
}

impl Dataset for TensorDataset {
    fn len(&self) -> usize {
        self.labels.len()
    }
    fn get(&self, index: usize, _rng: &mut AugRng) -> Result<(TensorImage, i64)> {
        let n: usize = self.shape.iter().product();
        let data = self.images.get(index * n..(index + 1) * n).ok_or_else(|| {
            Error::InvalidArgument(format!("TensorDataset index {index} out of range"))
        })?;
        let [channels, height, width] = self.shape;
        Ok((TensorImage { channels, height, width, data: data.to_vec() }, self.labels[index]))
    }
    fn label(&self, index: usize) -> i64 {
        self.labels[index]
    }
    fn classes(&self) -> Vec<String> {
        self.classes.clone()
    }
}
