//! `transforms.RandAugment` and `transforms.TrivialAugmentWide`: operations drawn uniformly
//! from torchvision's list (AutoAugment's without `Invert`, plus `Identity`), with torchvision's
//! magnitude bins (`_augmentation_space`), NEAREST resampling (or `interpolation(..)`'s) and
//! black fill, as torchvision's defaults. The draws come from the sample's [`AugRng`], not torch's generator: the same ops
//! and magnitudes give torchvision's pixels bit for bit (tests/parity/transforms_parity.rs), the
//! draws follow the same distribution.
use rand::Rng;

use super::autoaugment::linspace_n;
use super::autoaugment_ops::AugmentOp;
use super::functional::Interpolation;
use super::{AugRng, Image, ImageTransform};

/// torchvision's default resampling for these transforms.
const NEAREST: Interpolation = Interpolation::Nearest;
use crate::{Error, Result};

/// torchvision's operation list of both transforms, in its order.
pub const RAND_AUGMENT_OPS: [AugmentOp; 14] = {
    use AugmentOp::*;
    [
        Identity,
        ShearX,
        ShearY,
        TranslateX,
        TranslateY,
        Rotate,
        Brightness,
        Color,
        Contrast,
        Sharpness,
        Posterize,
        Solarize,
        AutoContrast,
        Equalize,
    ]
};

/// Whose magnitude ranges: RandAugment's (AutoAugment's ranges over `bins` bins),
/// TrivialAugmentWide's wider ones, or AugMix's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AugmentSpace {
    /// `RandAugment._augmentation_space`.
    RandAugment,
    /// `TrivialAugmentWide._augmentation_space`.
    TrivialAugmentWide,
    /// `AugMix._augmentation_space` (translations up to a third of the picture, `Posterize`
    /// from 4 bits down).
    AugMix,
}

impl AugmentSpace {
    /// The magnitude of `op` at `bin` of `bins` for an image of `width` x `height`, and whether
    /// it takes a random sign, as torchvision's `_augmentation_space(bins, (height, width))`.
    pub fn magnitude(
        self,
        op: AugmentOp,
        bins: usize,
        bin: usize,
        width: u32,
        height: u32,
    ) -> (f32, bool) {
        use AugmentOp::*;
        let wide = self == AugmentSpace::TrivialAugmentWide;
        let augmix = self == AugmentSpace::AugMix;
        let lin = |end: f32| linspace_n(0.0, end, bins)[bin];
        match op {
            ShearX | ShearY => (lin(if wide { 0.99 } else { 0.3 }), true),
            TranslateX if wide => (lin(32.0), true),
            TranslateY if wide => (lin(32.0), true),
            TranslateX if augmix => (lin((width as f64 / 3.0) as f32), true),
            TranslateY if augmix => (lin((height as f64 / 3.0) as f32), true),
            TranslateX => (lin((150.0 / 331.0 * width as f64) as f32), true),
            TranslateY => (lin((150.0 / 331.0 * height as f64) as f32), true),
            Rotate => (lin(if wide { 135.0 } else { 30.0 }), true),
            Brightness | Color | Contrast | Sharpness => (lin(if wide { 0.99 } else { 0.9 }), true),
            Posterize => {
                // top - (arange(bins) / ((bins - 1) / k)).round().int(), in float32.
                let (top, k) = match self {
                    AugmentSpace::TrivialAugmentWide => (8.0, 6.0),
                    AugmentSpace::RandAugment => (8.0, 4.0),
                    AugmentSpace::AugMix => (4.0, 4.0),
                };
                let div = ((bins - 1) as f64 / k) as f32;
                (top - (bin as f32 / div).round_ties_even(), false)
            }
            Solarize => (linspace_n(255.0, 0.0, bins)[bin], false),
            Identity | AutoContrast | Equalize | Invert => (0.0, false),
        }
    }
}

fn has_magnitude(op: AugmentOp) -> bool {
    !matches!(
        op,
        AugmentOp::Identity | AugmentOp::AutoContrast | AugmentOp::Equalize | AugmentOp::Invert
    )
}

/// `transforms.RandAugment(num_ops=2, magnitude=9, num_magnitude_bins=31)`: `num_ops` times, an
/// operation drawn uniformly, at bin `magnitude`, its sign drawn for the signed ones.
///
/// ```
/// use trainbook::transforms::{aug_rng, Image, ImageTransform, RandAugment};
/// # fn main() -> trainbook::Result<()> {
/// let ra = RandAugment::new(2, 9, 31)?; // torchvision's defaults, also RandAugment::default()
/// let img = Image::zeros(32, 32, 3);
/// let out = ra.apply_image(img, &mut aug_rng(0, 0, 7))?;
/// assert_eq!((out.width(), out.height()), (32, 32));
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RandAugment {
    num_ops: usize,
    magnitude: usize,
    num_magnitude_bins: usize,
    interpolation: Interpolation,
}

impl RandAugment {
    /// `RandAugment(num_ops, magnitude, num_magnitude_bins)`. Errors
    /// ([`Error::InvalidArgument`]): fewer than 2 bins, or `magnitude` not below the bin count.
    pub fn new(num_ops: usize, magnitude: usize, num_magnitude_bins: usize) -> Result<Self> {
        check_bins("RandAugment", num_magnitude_bins)?;
        if magnitude >= num_magnitude_bins {
            return Err(Error::InvalidArgument(format!(
                "RandAugment: magnitude must be below num_magnitude_bins ({num_magnitude_bins}), got {magnitude}"
            )));
        }
        Ok(RandAugment { num_ops, magnitude, num_magnitude_bins, interpolation: NEAREST })
    }

    /// The resampling of the rotations, shears and translations (torchvision's
    /// `interpolation=`, NEAREST by default; the classification reference passes its
    /// `--interpolation`).
    pub fn interpolation(mut self, interpolation: Interpolation) -> Self {
        self.interpolation = interpolation;
        self
    }

    /// Applies the given draws: each an operation, its bin and whether its sign flips (what
    /// [`apply_image`](ImageTransform::apply_image) draws from the sample's stream).
    pub fn apply_draws(&self, img: Image, draws: &[(AugmentOp, usize, bool)]) -> Image {
        let space = (AugmentSpace::RandAugment, self.num_magnitude_bins);
        apply(space, self.interpolation, img, draws)
    }
}

impl Default for RandAugment {
    fn default() -> Self {
        RandAugment { num_ops: 2, magnitude: 9, num_magnitude_bins: 31, interpolation: NEAREST }
    }
}

impl ImageTransform for RandAugment {
    fn apply_image(&self, img: Image, rng: &mut AugRng) -> Result<Image> {
        let draws: Vec<_> = (0..self.num_ops)
            .map(|_| {
                let op = RAND_AUGMENT_OPS[rng.random_range(0..RAND_AUGMENT_OPS.len())];
                (op, self.magnitude, rng.random::<bool>())
            })
            .collect();
        Ok(self.apply_draws(img, &draws))
    }
}

/// `transforms.TrivialAugmentWide(num_magnitude_bins=31)`: one operation drawn uniformly, at a
/// bin drawn uniformly, its sign drawn for the signed ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrivialAugmentWide {
    num_magnitude_bins: usize,
    interpolation: Interpolation,
}

impl TrivialAugmentWide {
    /// `TrivialAugmentWide(num_magnitude_bins)`; fewer than 2 bins is an
    /// [`Error::InvalidArgument`].
    pub fn new(num_magnitude_bins: usize) -> Result<Self> {
        check_bins("TrivialAugmentWide", num_magnitude_bins)?;
        Ok(TrivialAugmentWide { num_magnitude_bins, interpolation: NEAREST })
    }

    /// The resampling of the geometric operations (see [`RandAugment::interpolation`]).
    pub fn interpolation(mut self, interpolation: Interpolation) -> Self {
        self.interpolation = interpolation;
        self
    }

    /// Applies the given draws (see [`RandAugment::apply_draws`]).
    pub fn apply_draws(&self, img: Image, draws: &[(AugmentOp, usize, bool)]) -> Image {
        let space = (AugmentSpace::TrivialAugmentWide, self.num_magnitude_bins);
        apply(space, self.interpolation, img, draws)
    }
}

impl Default for TrivialAugmentWide {
    fn default() -> Self {
        TrivialAugmentWide { num_magnitude_bins: 31, interpolation: NEAREST }
    }
}

impl ImageTransform for TrivialAugmentWide {
    fn apply_image(&self, img: Image, rng: &mut AugRng) -> Result<Image> {
        let op = RAND_AUGMENT_OPS[rng.random_range(0..RAND_AUGMENT_OPS.len())];
        let bin = rng.random_range(0..self.num_magnitude_bins);
        let draw = (op, bin, rng.random::<bool>());
        Ok(self.apply_draws(img, &[draw]))
    }
}

fn check_bins(name: &str, bins: usize) -> Result<()> {
    if bins < 2 {
        return Err(Error::InvalidArgument(format!(
            "{name}: num_magnitude_bins must be at least 2, got {bins}"
        )));
    }
    Ok(())
}

fn apply(
    (space, bins): (AugmentSpace, usize),
    interpolation: Interpolation,
    mut img: Image,
    draws: &[(AugmentOp, usize, bool)],
) -> Image {
    for &(op, bin, negate) in draws {
        let (mut m, signed) = if has_magnitude(op) {
            space.magnitude(op, bins, bin.min(bins - 1), img.width(), img.height())
        } else {
            (0.0, false)
        };
        if signed && negate {
            m = -m;
        }
        img = op.apply_with(&img, m, interpolation);
    }
    img
}

#[cfg(test)]
mod tests;
