//! Image transforms with torchvision's names, defaults and numerics: `Compose`, `Resize`,
//! `CenterCrop`, `RandomResizedCrop`, `RandomHorizontalFlip`, `AutoAugment`, `RandAugment`,
//! `TrivialAugmentWide`, `AugMix`, `ColorJitter`, `RandomErasing`, `ToTensor`,
//! `Normalize`, and the batch transforms `MixUp`/`CutMix` ([`MixUpCutMix`]). Deterministic ones match torchvision's PIL path; random ones draw from an
//! [`AugRng`] that is a pure function of (seed, epoch, sample index), so the augmentation of a
//! sample does not depend on rank, world size or loader threads.
mod augmix;
mod autoaugment;
mod autoaugment_ops;
mod color_jitter;
mod crop;
mod erasing;
mod image;
mod mix;
mod pil_affine;
mod pil_resample;
mod rand_augment;
mod resize;
mod tensor;
mod tensor_ops;

use std::fmt::Debug;

use rand::SeedableRng;

pub use self::augmix::{AugMix, AugMixDraw, AugMixStep, AUGMIX_BINS, AUGMIX_OPS};
pub use self::autoaugment::{AutoAugment, AutoAugmentPolicy};
pub use self::autoaugment_ops::AugmentOp;
pub use self::color_jitter::{adjust_hue, ColorJitter, JitterDraw};
pub use self::crop::{CenterCrop, RandomHorizontalFlip, RandomResizedCrop};
pub use self::erasing::{EraseDraws, EraseValue, RandomErasing};
pub use self::image::Image;
pub use self::mix::{cutmix_box, MixDraw, MixUpCutMix};
pub use self::rand_augment::{AugmentSpace, RandAugment, TrivialAugmentWide, RAND_AUGMENT_OPS};
pub use self::resize::{resize, resize_bilinear, Interpolation, Resize, Size};
pub use self::tensor::{Normalize, TensorImage, ToTensor};
use crate::{Error, Result};

/// The random stream of one sample's augmentation (ChaCha8, from the `rand_chacha` crate).
pub type AugRng = rand_chacha::ChaCha8Rng;

/// The augmentation stream of sample `index` (its index in the data set) in `epoch` for a run
/// seeded with `seed`: the same stream on any rank, in any loader thread, after any resume.
pub fn aug_rng(seed: u64, epoch: u64, index: u64) -> AugRng {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8..16].copy_from_slice(&epoch.to_le_bytes());
    key[16..24].copy_from_slice(&index.to_le_bytes());
    key[24..].copy_from_slice(b"trainbk1");
    AugRng::from_seed(key)
}

/// The random stream of batch `position` of `epoch` whose first sample is data-set index
/// `first` (batch transforms: [`MixUpCutMix`]): the same on any thread and after a resume, and
/// different on each rank (their batches hold different samples).
pub fn batch_rng(seed: u64, epoch: u64, position: u64, first: u64) -> AugRng {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8..16].copy_from_slice(&epoch.to_le_bytes());
    key[16..24].copy_from_slice(&position.to_le_bytes());
    key[24..].copy_from_slice(&first.to_le_bytes());
    // A distinct stream from every sample's: ChaCha's stream number.
    let mut rng = AugRng::from_seed(key);
    rng.set_stream(0x6d69_785f_6261_7463); // "mix_batc"
    rng
}

/// What flows through a pipeline: an image before `ToTensor`, a float tensor after it.
#[derive(Clone, Debug)]
pub enum Sample {
    /// An 8-bit picture, the PIL image of a torchvision pipeline.
    Image(Image),
    /// A CHW float32 image, after [`ToTensor`].
    Tensor(TensorImage),
}

impl Sample {
    /// The tensor form (an image is converted like [`ToTensor`]).
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
    /// Transforms `input`, drawing any randomness from `rng` (the sample's [`aug_rng`]
    /// stream). Errors: [`Error::InvalidArgument`] when `input` is in the wrong form for this
    /// step (an image transform after `ToTensor`, `Normalize` before it).
    fn apply(&self, input: Sample, rng: &mut AugRng) -> Result<Sample>;
}

/// A transform on images (before `ToTensor`), like most of torchvision's PIL transforms. Every
/// `ImageTransform` is a [`Transform`] that rejects tensors.
pub trait ImageTransform: Send + Sync + Debug {
    /// Transforms `img`, drawing any randomness from `rng` (the sample's [`aug_rng`] stream).
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
