//! What a pipeline is made of: the [`Sample`] that flows through it (an image, then a tensor),
//! the [`Transform`] and [`ImageTransform`] traits every step implements, and [`Compose`] (with
//! the [`compose!`](crate::compose) macro), torchvision's `transforms.Compose`.
use std::fmt::Debug;

use super::aug_rng::AugRng;
use super::image::Image;
use super::tensor_image::TensorImage;
use crate::{Error, Result};

/// What flows through a pipeline: an image before `ToTensor`, a float tensor after it.
#[derive(Clone, Debug)]
pub enum Sample {
    /// An 8-bit picture, the PIL image of a torchvision pipeline.
    Image(Image),
    /// A CHW float32 image, after [`ToTensor`](super::ToTensor).
    Tensor(TensorImage),
}

impl Sample {
    /// The tensor form (an image is converted like [`ToTensor`](super::ToTensor)).
    pub fn into_tensor(self) -> TensorImage {
        match self {
            Sample::Image(img) => TensorImage::from_image(&img),
            Sample::Tensor(t) => t,
        }
    }
}

/// One step of a pipeline (a torchvision transform's `__call__`), on images or tensors.
/// Implement [`ImageTransform`] instead for a step that only takes images.
pub trait Transform: Send + Sync + Debug {
    /// Transforms `input`, drawing any randomness from `rng` (the sample's [`aug_rng`](super::aug_rng)
    /// stream). Errors: [`Error::InvalidArgument`] when `input` is in the wrong form for this
    /// step (an image transform after `ToTensor`, `Normalize` before it).
    fn apply(&self, input: Sample, rng: &mut AugRng) -> Result<Sample>;
}

/// A transform on images (before `ToTensor`), like most of torchvision's PIL transforms. Every
/// `ImageTransform` is a [`Transform`] that rejects tensors.
pub trait ImageTransform: Send + Sync + Debug {
    /// Transforms `img`, drawing any randomness from `rng` (the sample's [`aug_rng`](super::aug_rng) stream).
    fn apply_image(&self, img: Image, rng: &mut AugRng) -> Result<Image>;
}

impl<T: ImageTransform> Transform for T {
    fn apply(&self, input: Sample, rng: &mut AugRng) -> Result<Sample> {
        match input {
            Sample::Image(img) => Ok(Sample::Image(self.apply_image(img, rng)?)),
            Sample::Tensor(_) => Err(Error::InvalidArgument(format!(
                "{self:?} works on images: put it before ToTensor"
            ))),
        }
    }
}

/// `transforms.Compose([...])`: applies its transforms in order. Cloning is cheap (the steps
/// are shared), so one pipeline can serve several data sets.
#[derive(Clone, Debug, Default)]
pub struct Compose {
    steps: std::sync::Arc<[Box<dyn Transform>]>,
}

impl Compose {
    /// The pipeline of `steps`, applied first to last (see also [`compose!`](crate::compose)).
    pub fn new(steps: Vec<Box<dyn Transform>>) -> Compose {
        Compose { steps: steps.into() }
    }

    /// Applies every step to `input`, drawing random parameters from `rng`.
    pub fn apply(&self, input: Sample, rng: &mut AugRng) -> Result<Sample> {
        self.steps.iter().try_fold(input, |x, step| step.apply(x, rng))
    }

    /// Runs the pipeline on an image and returns the tensor (adding `ToTensor` if missing).
    pub fn apply_image(&self, img: Image, rng: &mut AugRng) -> Result<TensorImage> {
        Ok(self.apply(Sample::Image(img), rng)?.into_tensor())
    }

    /// The number of steps.
    pub fn len(&self) -> usize {
        self.steps.len()
    }
    /// `true` for a pipeline without steps.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }
}

/// `compose![Resize::new((244, 244)), ToTensor]` builds a [`Compose`] like
/// `transforms.Compose([...])`, boxing each step.
#[macro_export]
macro_rules! compose {
    ($($step:expr),* $(,)?) => {
        $crate::transforms::Compose::new(vec![$(Box::new($step) as Box<dyn $crate::transforms::Transform>),*])
    };
}
