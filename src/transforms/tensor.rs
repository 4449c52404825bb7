//! `ToTensor` (HWC bytes -> CHW floats in [0, 1]) and `Normalize` ((x - mean) / std per channel).
use super::tensor_image::TensorImage;
use super::{AugRng, Sample, Transform};
use crate::{Error, Result};

/// `transforms.ToTensor()`: HWC bytes to CHW float32 values in [0, 1] (divided by 255).
/// Errors when applied to a tensor (twice in a pipeline).
#[derive(Clone, Copy, Debug, Default)]
pub struct ToTensor;

impl Transform for ToTensor {
    fn apply(&self, input: Sample, _rng: &mut AugRng) -> Result<Sample> {
        match input {
            Sample::Image(img) => Ok(Sample::Tensor(TensorImage::from_image(&img))),
            Sample::Tensor(_) => Err(Error::InvalidArgument("ToTensor applied twice".into())),
        }
    }
}

/// `transforms.Normalize(mean, std)`: `(x - mean[c]) / std[c]` for each channel c. Works on
/// tensors: put it after `ToTensor`.
#[derive(Clone, Debug)]
pub struct Normalize {
    mean: Vec<f32>,
    std: Vec<f32>,
}

impl Normalize {
    /// Per-channel `mean` and `std` (one value each, or one value for all channels). A length
    /// that fits neither, or a zero std, is an [`Error::InvalidArgument`] when applied.
    pub fn new(mean: &[f32], std: &[f32]) -> Normalize {
        Normalize { mean: mean.to_vec(), std: std.to_vec() }
    }
    /// ImageNet statistics, as used with torchvision's pretrained models.
    pub fn imagenet() -> Normalize {
        Normalize::new(&[0.485, 0.456, 0.406], &[0.229, 0.224, 0.225])
    }
}

impl Transform for Normalize {
    fn apply(&self, input: Sample, _rng: &mut AugRng) -> Result<Sample> {
        let mut t = match input {
            Sample::Tensor(t) => t,
            Sample::Image(_) => {
                return Err(Error::InvalidArgument(
                    "Normalize works on tensors: put it after ToTensor".into(),
                ))
            }
        };
        let per_channel = |v: &[f32], what: &str| -> Result<Vec<f32>> {
            match v.len() {
                1 => Ok(vec![v[0]; t.channels]),
                n if n == t.channels => Ok(v.to_vec()),
                n => Err(Error::InvalidArgument(format!(
                    "Normalize: {n} {what} values for {} channels",
                    t.channels
                ))),
            }
        };
        let (mean, std) = (per_channel(&self.mean, "mean")?, per_channel(&self.std, "std")?);
        if std.contains(&0.0) {
            return Err(Error::InvalidArgument("Normalize: std must not be 0".into()));
        }
        let plane = t.height * t.width;
        for (c, chunk) in t.data.chunks_exact_mut(plane.max(1)).enumerate().take(t.channels) {
            for v in chunk {
                *v = (*v - mean[c]) / std[c];
            }
        }
        Ok(Sample::Tensor(t))
    }
}
