//! Image transforms with torchvision's names, defaults and numerics: `Compose`, `Resize`,
//! `CenterCrop`, `RandomResizedCrop`, `RandomHorizontalFlip`, `AutoAugment`, `RandAugment`,
//! `TrivialAugmentWide`, `AugMix`, `ColorJitter`, `RandomErasing`, `ToTensor`,
//! `Normalize`, and the batch transforms `MixUp`/`CutMix` ([`MixUpCutMix`]). Deterministic ones match torchvision's PIL path; random ones draw from an
//! [`AugRng`] that is a pure function of (seed, epoch, sample index), so the augmentation of a
//! sample does not depend on rank, world size or loader threads.
mod aug_rng;
mod augmix;
mod autoaugment;
mod autoaugment_ops;
mod color_jitter;
mod crop;
mod erasing;
pub(crate) mod functional;
mod image;
mod mix;
mod pipeline;
mod rand_augment;
mod resize;
mod tensor;
mod tensor_image;
mod tensor_ops;

pub use self::aug_rng::{aug_rng, batch_rng, AugRng};
pub use self::augmix::{AugMix, AugMixDraw, AugMixStep, AUGMIX_BINS, AUGMIX_OPS};
pub use self::autoaugment::{AutoAugment, AutoAugmentPolicy};
pub use self::autoaugment_ops::AugmentOp;
pub use self::color_jitter::{adjust_hue, ColorJitter, JitterDraw};
pub use self::crop::{CenterCrop, RandomHorizontalFlip, RandomResizedCrop};
pub use self::erasing::{EraseDraws, EraseValue, RandomErasing};
pub use self::functional::Interpolation;
pub use self::image::Image;
pub use self::mix::{cutmix_box, MixDraw, MixUpCutMix};
pub use self::pipeline::{Compose, ImageTransform, Sample, Transform};
pub use self::rand_augment::{AugmentSpace, RandAugment, TrivialAugmentWide, RAND_AUGMENT_OPS};
pub use self::resize::{resize, resize_bilinear, Resize, Size};
pub use self::tensor::{Normalize, ToTensor};
pub use self::tensor_image::TensorImage;
