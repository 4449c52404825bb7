//! `ToTensor` (HWC bytes -> CHW floats in [0, 1]) and `Normalize` ((x - mean) / std per channel).
use super::{AugRng, Image, Sample, Transform};
use crate::{Error, Result};

/// A CHW float32 image, the form a loader stacks into a `[B, C, H, W]` batch.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorImage {
    /// Number of channels, C (1 for grey, 3 for RGB).
    pub channels: usize,
    /// Height in pixels, H.
    pub height: usize,
    /// Width in pixels, W.
    pub width: usize,
    /// The values, channel planes one after the other, each row-major: `C * H * W` floats
    /// (in [0, 1] after `ToTensor`, standardised after `Normalize`).
    pub data: Vec<f32>,
}

impl TensorImage {
    /// torchvision's `to_tensor`: bytes divided by 255 in float32, channels first.
    pub fn from_image(img: &Image) -> TensorImage {
        let (c, h, w) = (img.channels() as usize, img.height() as usize, img.width() as usize);
        // v / 255 in float32 for every byte value: the same results as dividing, without dividing.
        let lut: [f32; 256] = std::array::from_fn(|v| v as f32 / 255.0);
        let plane = h * w;
        let mut data = vec![0f32; c * plane];
        let src = img.data();
        if c == 3 {
            let (r, gb) = data.split_at_mut(plane);
            let (g, b) = gb.split_at_mut(plane);
            for (((px, r), g), b) in src.chunks_exact(3).zip(r).zip(g).zip(b) {
                *r = lut[px[0] as usize];
                *g = lut[px[1] as usize];
                *b = lut[px[2] as usize];
            }
        } else {
            for (o, &v) in data.iter_mut().zip(src) {
                *o = lut[v as usize];
            }
        }
        TensorImage { channels: c, height: h, width: w, data }
    }

    /// `[C, H, W]`, as `tensor.shape` in torchvision.
    pub fn shape(&self) -> [usize; 3] {
        [self.channels, self.height, self.width]
    }

    /// A `[C, H, W]` float32 CPU tensor holding a copy of the values.
    ///
    /// # Panics
    ///
    /// When `data` does not hold `C * H * W` values (possible only if the public fields were
    /// set inconsistently by hand).
    pub fn to_tensor(&self) -> tch::Tensor {
        tch::Tensor::from_slice(&self.data).view([
            self.channels as i64,
            self.height as i64,
            self.width as i64,
        ])
    }
}

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
