//! `TensorDataset`: samples already in memory as a `[N, C, H, W]` float tensor with `[N]`
//! labels (like `torch.utils.data.TensorDataset`), or with float targets `[N, T]` for
//! regression and multi-label training, for quick experiments, tests and benchmarks.
use tch::{Device, Kind, Tensor};

use crate::data::Dataset;
use crate::transforms::{AugRng, TensorImage};
use crate::{Error, Result};

/// In-memory images with labels or float targets, like
/// `torch.utils.data.TensorDataset(images, labels)`: sample `i` is `images[i]` (no transform,
/// `rng` unused) with label `labels[i]` ([`new`](Self::new)) or target `targets[i]`
/// ([`with_targets`](Self::with_targets)).
///
/// ```
/// use tch::{Device, Kind, Tensor};
/// use trainbook::data::{Dataset, TensorDataset};
/// let images = Tensor::zeros([4, 1, 2, 2], (Kind::Float, Device::Cpu));
/// let targets = Tensor::from_slice(&[0.5f32, 1.0, 1.5, 2.0]);
/// let ds = TensorDataset::with_targets(&images, &targets)?;
/// assert_eq!(ds.target(2), Some(vec![1.5]));
/// # Ok::<(), trainbook::Error>(())
/// ```
pub struct TensorDataset {
    images: Vec<f32>,
    shape: [usize; 3],
    labels: Vec<i64>,
    classes: Vec<String>,
    /// Float targets, row-major `[N, width]`, and the width.
    targets: Option<(Vec<f32>, usize)>,
}

impl TensorDataset {
    /// Copies `images` (`[N, C, H, W]`, any kind, stored as float32) and `labels` (`[N]`, any
    /// integer kind) to host memory; `classes` are the class names, index = label. Errors:
    /// [`Error::InvalidArgument`] for other shapes.
    pub fn new(images: &Tensor, labels: &Tensor, classes: Vec<String>) -> Result<TensorDataset> {
        let n = check_images(images)?;
        if labels.size() != [n] {
            return Err(Error::InvalidArgument(format!(
                "TensorDataset: images {:?} and labels {:?} (expected [N,C,H,W] and [N])",
                images.size(),
                labels.size()
            )));
        }
        let labels: Vec<i64> = Vec::try_from(labels.to_device(Device::Cpu).to_kind(Kind::Int64))?;
        Ok(TensorDataset { labels, classes, targets: None, ..host_images(images)? })
    }

    /// Images with float targets for regression or multi-label training: `targets` is `[N]`
    /// (one value per sample, delivered as `[B, 1]` batches) or `[N, T]` (stored as float32).
    /// Labels are all 0 and there are no class names. Errors: [`Error::InvalidArgument`] for
    /// other shapes.
    pub fn with_targets(images: &Tensor, targets: &Tensor) -> Result<TensorDataset> {
        let n = check_images(images)?;
        let size = targets.size();
        let width = match size.as_slice() {
            [m] if *m == n => 1,
            [m, t] if *m == n && *t > 0 => *t as usize,
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "TensorDataset: images {:?} and targets {size:?} (expected [N,C,H,W] and [N] or [N,T])",
                    images.size()
                )))
            }
        };
        let values: Vec<f32> = Vec::try_from(
            targets.to_device(Device::Cpu).to_kind(Kind::Float).contiguous().view([-1]),
        )?;
        Ok(TensorDataset {
            labels: vec![0; n as usize],
            classes: Vec::new(),
            targets: Some((values, width)),
            ..host_images(images)?
        })
    }
}

/// The sample count of `[N, C, H, W]` images, or an error naming their shape.
fn check_images(images: &Tensor) -> Result<i64> {
    match images.size().as_slice() {
        [n, _, _, _] => Ok(*n),
        other => Err(Error::InvalidArgument(format!(
            "TensorDataset: images {other:?} (expected [N,C,H,W])"
        ))),
    }
}

/// The images copied to host memory as float32 (labels, classes and targets left empty).
fn host_images(images: &Tensor) -> Result<TensorDataset> {
    let size = images.size();
    let data: Vec<f32> =
        Vec::try_from(images.to_device(Device::Cpu).to_kind(Kind::Float).contiguous().view([-1]))?;
    Ok(TensorDataset {
        images: data,
        shape: [size[1] as usize, size[2] as usize, size[3] as usize],
        labels: Vec::new(),
        classes: Vec::new(),
        targets: None,
    })
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
    fn target(&self, index: usize) -> Option<Vec<f32>> {
        let (values, width) = self.targets.as_ref()?;
        values.get(index * width..(index + 1) * width).map(<[f32]>::to_vec)
    }
}
