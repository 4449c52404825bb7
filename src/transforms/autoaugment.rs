//! `transforms.AutoAugment(AutoAugmentPolicy.IMAGENET)`: picks one of 25 sub-policies at random
//! and applies each of its two operations with its probability and a fixed magnitude bin.
use rand::Rng;

use super::autoaugment_ops::AugmentOp;
use super::functional::Interpolation;
use super::{AugRng, Image, ImageTransform};
use crate::Result;

/// Which learned policy to use (torchvision's `AutoAugmentPolicy`); ImageNet is the default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AutoAugmentPolicy {
    /// The 25 sub-policies learned on ImageNet (`AutoAugmentPolicy.IMAGENET`).
    #[default]
    ImageNet,
}

type Step = (AugmentOp, f32, Option<usize>);

/// ImageNet sub-policies: (operation, probability, magnitude bin).
const IMAGENET: [[Step; 2]; 25] = {
    use AugmentOp::*;
    [
        [(Posterize, 0.4, Some(8)), (Rotate, 0.6, Some(9))],
        [(Solarize, 0.6, Some(5)), (AutoContrast, 0.6, None)],
        [(Equalize, 0.8, None), (Equalize, 0.6, None)],
        [(Posterize, 0.6, Some(7)), (Posterize, 0.6, Some(6))],
        [(Equalize, 0.4, None), (Solarize, 0.2, Some(4))],
        [(Equalize, 0.4, None), (Rotate, 0.8, Some(8))],
        [(Solarize, 0.6, Some(3)), (Equalize, 0.6, None)],
        [(Posterize, 0.8, Some(5)), (Equalize, 1.0, None)],
        [(Rotate, 0.2, Some(3)), (Solarize, 0.6, Some(8))],
        [(Equalize, 0.6, None), (Posterize, 0.4, Some(6))],
        [(Rotate, 0.8, Some(8)), (Color, 0.4, Some(0))],
        [(Rotate, 0.4, Some(9)), (Equalize, 0.6, None)],
        [(Equalize, 0.0, None), (Equalize, 0.8, None)],
        [(Invert, 0.6, None), (Equalize, 1.0, None)],
        [(Color, 0.6, Some(4)), (Contrast, 1.0, Some(8))],
        [(Rotate, 0.8, Some(8)), (Color, 1.0, Some(2))],
        [(Color, 0.8, Some(8)), (Solarize, 0.8, Some(7))],
        [(Sharpness, 0.4, Some(7)), (Invert, 0.6, None)],
        [(ShearX, 0.6, Some(5)), (Equalize, 1.0, None)],
        [(Color, 0.4, Some(0)), (Equalize, 0.6, None)],
        [(Equalize, 0.4, None), (Solarize, 0.2, Some(4))],
        [(Solarize, 0.6, Some(5)), (AutoContrast, 0.6, None)],
        [(Invert, 0.6, None), (Equalize, 1.0, None)],
        [(Color, 0.6, Some(4)), (Contrast, 1.0, Some(8))],
        [(Equalize, 0.8, None), (Equalize, 0.6, None)],
    ]
};

const NUM_BINS: usize = 10;

/// `torch.linspace(start, end, n)` in float32, with torch's two-sided evaluation (the first
/// half from `start`, the second from `end`).
pub(crate) fn linspace_n(start: f32, end: f32, n: usize) -> Vec<f32> {
    let step = (end - start) / (n.max(2) - 1) as f32;
    (0..n)
        .map(|i| {
            if i < n / 2 {
                step.mul_add(i as f32, start)
            } else {
                (-step).mul_add((n - 1 - i) as f32, end)
            }
        })
        .collect()
}

/// `torch.linspace(start, end, 10)`: AutoAugment's bins.
fn linspace(start: f32, end: f32) -> [f32; NUM_BINS] {
    let v = linspace_n(start, end, NUM_BINS);
    std::array::from_fn(|i| v[i])
}

/// The magnitude of `op` at `bin` for an image of `width` x `height`, and whether the
/// operation takes a random sign (torchvision's `_augmentation_space`).
pub(crate) fn magnitude(op: AugmentOp, bin: usize, width: u32, height: u32) -> (f32, bool) {
    use AugmentOp::*;
    match op {
        ShearX | ShearY => (linspace(0.0, 0.3)[bin], true),
        TranslateX => (linspace(0.0, (150.0 / 331.0 * width as f64) as f32)[bin], true),
        TranslateY => (linspace(0.0, (150.0 / 331.0 * height as f64) as f32)[bin], true),
        Rotate => (linspace(0.0, 30.0)[bin], true),
        Brightness | Color | Contrast | Sharpness => (linspace(0.0, 0.9)[bin], true),
        Posterize => ((8 - [0, 0, 1, 1, 2, 2, 3, 3, 4, 4][bin]) as f32, false),
        Solarize => (linspace(255.0, 0.0)[bin], false),
        Identity | AutoContrast | Equalize | Invert => (0.0, false),
    }
}

/// `transforms.AutoAugment()` (fill black, NEAREST interpolation, like torchvision's defaults).
#[derive(Clone, Copy, Debug)]
pub struct AutoAugment {
    policy: AutoAugmentPolicy,
    interpolation: Interpolation,
}

impl AutoAugment {
    /// `transforms.AutoAugment(policy)`.
    pub fn new(policy: AutoAugmentPolicy) -> AutoAugment {
        AutoAugment { policy, interpolation: Interpolation::Nearest }
    }
    /// The resampling of the rotations, shears and translations (torchvision's
    /// `interpolation=`, NEAREST by default).
    pub fn interpolation(mut self, interpolation: Interpolation) -> Self {
        self.interpolation = interpolation;
        self
    }
    /// `transforms.AutoAugment(AutoAugmentPolicy.IMAGENET)`, the same as `Default`.
    pub fn imagenet() -> AutoAugment {
        AutoAugment::new(AutoAugmentPolicy::ImageNet)
    }
}

impl Default for AutoAugment {
    fn default() -> Self {
        AutoAugment::imagenet()
    }
}

impl ImageTransform for AutoAugment {
    fn apply_image(&self, img: Image, rng: &mut AugRng) -> Result<Image> {
        let AutoAugmentPolicy::ImageNet = self.policy;
        let policy = &IMAGENET[rng.random_range(0..IMAGENET.len())];
        let probs: [f32; 2] = [rng.random(), rng.random()];
        let negate: [bool; 2] = [rng.random(), rng.random()];
        let mut img = img;
        for (i, &(op, p, bin)) in policy.iter().enumerate() {
            if probs[i] <= p {
                let (mut m, signed) =
                    bin.map_or((0.0, false), |b| magnitude(op, b, img.width(), img.height()));
                if signed && negate[i] {
                    m = -m;
                }
                img = op.apply_with(&img, m, self.interpolation);
            }
        }
        Ok(img)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_match_torch_linspace() {
        assert_eq!(linspace(0.0, 0.3)[1], 0.033333335);
        assert_eq!(linspace(0.0, 0.9)[3], 0.29999998);
        assert_eq!(linspace(0.0, 30.0)[5], 16.666668);
        assert_eq!(linspace(255.0, 0.0)[1], 226.66667);
        assert_eq!(magnitude(AugmentOp::Posterize, 9, 1, 1), (4.0, false));
    }
}
