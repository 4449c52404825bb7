//! `transforms.AugMix` (Hendrycks et al., 2020): `mixture_width` chains of one to three
//! operations each, mixed with Dirichlet weights, then mixed with the original picture by a
//! Beta weight. As torchvision does, the picture becomes a uint8 tensor first and every
//! operation is torchvision's tensor kernel ([`tensor_ops`](super::tensor_ops)), BILINEAR by
//! default; the weighted sum is float32, truncated back to bytes. The draws come from the
//! sample's [`AugRng`] instead of torch's generator: for the same draws the bytes are
//! torchvision's (tests/parity/augmix_parity.rs), and the draws follow its distributions.
use rand::Rng;
use rand_distr::{Distribution, Gamma};
use tch::{Kind, Tensor};

use super::autoaugment_ops::AugmentOp;
use super::functional::Interpolation;
use super::rand_augment::AugmentSpace;
use super::tensor_ops::{apply_op, batch_to_image, image_to_batch};
use super::{AugRng, Image, ImageTransform};
use crate::{Error, Result};

/// torchvision's `AugMix._PARAMETER_MAX`: the magnitude bins, and the largest severity.
pub const AUGMIX_BINS: usize = 10;

/// AugMix's operations in torchvision's order (`_augmentation_space`); without `all_ops` only
/// the first nine.
pub const AUGMIX_OPS: [AugmentOp; 13] = {
    use AugmentOp::*;
    [
        ShearX,
        ShearY,
        TranslateX,
        TranslateY,
        Rotate,
        Posterize,
        Solarize,
        AutoContrast,
        Equalize,
        Brightness,
        Color,
        Contrast,
        Sharpness,
    ]
};

/// One operation of a chain: which, at which magnitude bin (below the severity), and whether
/// a signed magnitude is negated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AugMixStep {
    /// One of [`AUGMIX_OPS`].
    pub op: AugmentOp,
    /// The magnitude bin (`magnitudes[bin]`); ignored by `AutoContrast` and `Equalize`.
    pub bin: usize,
    /// Negates the magnitude of the signed operations (shears, translations, the rotation and
    /// the four enhancements); ignored by the others.
    pub negate: bool,
}

/// The random draws of one AugMix application (what torchvision draws from torch's generator).
#[derive(Clone, Debug, PartialEq)]
pub struct AugMixDraw {
    /// The Beta(alpha, alpha) pair, drawn as a two-way Dirichlet: the original picture's weight,
    /// then the chains' share.
    pub beta: [f32; 2],
    /// The chains' Dirichlet(alpha, ..., alpha) weights, one per chain.
    pub mixing: Vec<f32>,
    /// Each chain's operations, applied in order.
    pub chains: Vec<Vec<AugMixStep>>,
}

/// `transforms.AugMix(severity=3, mixture_width=3, chain_depth=-1, alpha=1.0, all_ops=True,
/// interpolation=BILINEAR)`, on images before `ToTensor`.
///
/// ```
/// use trainbook::transforms::{aug_rng, AugMix, Image, ImageTransform};
/// # fn main() -> trainbook::Result<()> {
/// let augmix = AugMix::new(3, 3, -1, 1.0)?; // torchvision's defaults, also AugMix::default()
/// let out = augmix.apply_image(Image::zeros(32, 24, 3), &mut aug_rng(0, 0, 7))?;
/// assert_eq!((out.width(), out.height()), (32, 24));
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AugMix {
    severity: usize,
    mixture_width: usize,
    chain_depth: i64,
    alpha: f64,
    all_ops: bool,
    interpolation: Interpolation,
}

impl Default for AugMix {
    fn default() -> Self {
        AugMix {
            severity: 3,
            mixture_width: 3,
            chain_depth: -1,
            alpha: 1.0,
            all_ops: true,
            interpolation: Interpolation::Bilinear,
        }
    }
}

impl AugMix {
    /// `AugMix(severity, mixture_width, chain_depth, alpha)`: magnitudes from the first
    /// `severity` of 10 bins, `mixture_width` chains, each `chain_depth` operations long (0 or
    /// less: 1 to 3, drawn per chain), Dirichlet and Beta parameter `alpha`. Errors
    /// ([`Error::InvalidArgument`]): a severity outside 1..=10, no chain, or `alpha` not a
    /// positive number.
    pub fn new(
        severity: usize,
        mixture_width: usize,
        chain_depth: i64,
        alpha: f64,
    ) -> Result<Self> {
        if !(1..=AUGMIX_BINS).contains(&severity) {
            return Err(Error::InvalidArgument(format!(
                "AugMix: the severity must be between 1 and {AUGMIX_BINS}, got {severity}"
            )));
        }
        if mixture_width == 0 {
            return Err(Error::InvalidArgument("AugMix: mixture_width must be at least 1".into()));
        }
        if !(alpha.is_finite() && alpha > 0.0) {
            return Err(Error::InvalidArgument(format!(
                "AugMix: alpha must be a positive number, got {alpha}"
            )));
        }
        Ok(AugMix { severity, mixture_width, chain_depth, alpha, ..AugMix::default() })
    }

    /// `all_ops=False` leaves out the four enhancements (brightness, colour, contrast,
    /// sharpness), as for data sets whose corruptions they resemble.
    pub fn all_ops(mut self, all_ops: bool) -> Self {
        self.all_ops = all_ops;
        self
    }

    /// The resampling of the shears, translations and the rotation: NEAREST or BILINEAR (the
    /// default), the two that torchvision's tensor kernels take; BICUBIC is an
    /// [`Error::InvalidArgument`].
    pub fn interpolation(mut self, interpolation: Interpolation) -> Result<Self> {
        if interpolation == Interpolation::Bicubic {
            return Err(Error::InvalidArgument(
                "AugMix: interpolation must be NEAREST or BILINEAR (torchvision's tensor kernels)"
                    .into(),
            ));
        }
        self.interpolation = interpolation;
        Ok(self)
    }

    /// The operations drawn from: all 13 of [`AUGMIX_OPS`], or the first 9 without `all_ops`.
    pub fn ops(&self) -> &'static [AugmentOp] {
        if self.all_ops {
            &AUGMIX_OPS
        } else {
            &AUGMIX_OPS[..9]
        }
    }

    /// Draws what one application needs, as torchvision does: the Beta pair, the chains'
    /// weights, and per chain its depth, then per operation one of [`ops`](Self::ops), a bin
    /// below the severity and a sign, all uniform.
    pub fn draw(&self, rng: &mut AugRng) -> AugMixDraw {
        let beta = dirichlet(rng, self.alpha, 2);
        let mixing = dirichlet(rng, self.alpha, self.mixture_width);
        let ops = self.ops();
        let chains = (0..self.mixture_width)
            .map(|_| {
                let depth = match self.chain_depth {
                    d if d > 0 => d as usize,
                    _ => rng.random_range(1..=3),
                };
                (0..depth)
                    .map(|_| AugMixStep {
                        op: ops[rng.random_range(0..ops.len())],
                        bin: rng.random_range(0..self.severity),
                        negate: rng.random::<bool>(),
                    })
                    .collect()
            })
            .collect();
        AugMixDraw { beta: [beta[0], beta[1]], mixing, chains }
    }

    /// Applies `draw` to `img`: torchvision's `AugMix.forward` with these draws. Errors
    /// ([`Error::InvalidArgument`]): as many chains as weights are needed, and each step's
    /// operation must be one of [`AUGMIX_OPS`] with a bin below 10.
    pub fn apply_draw(&self, img: &Image, draw: &AugMixDraw) -> Result<Image> {
        check_draw(draw)?;
        let batch = image_to_batch(img);
        let (w, h) = (img.width(), img.height());
        let m = Tensor::from_slice(&draw.beta).view([1, 2]);
        let k = draw.mixing.len() as i64;
        let weights = Tensor::from_slice(&draw.mixing).view([1, k]) * m.select(1, 1).view([1, -1]);
        let mut mix = m.select(1, 0).view([1, 1, 1, 1]) * &batch;
        for (i, chain) in draw.chains.iter().enumerate() {
            let mut aug = batch.shallow_clone();
            for step in chain {
                let m_step = magnitude(step, w, h);
                aug = apply_op(&aug, step.op, m_step, self.interpolation);
            }
            mix += weights.select(1, i as i64).view([1, 1, 1, 1]) * &aug;
        }
        Ok(batch_to_image(&mix.to_kind(Kind::Uint8)))
    }
}

impl ImageTransform for AugMix {
    fn apply_image(&self, img: Image, rng: &mut AugRng) -> Result<Image> {
        let draw = self.draw(rng);
        self.apply_draw(&img, &draw)
    }
}

/// A Dirichlet(alpha, ..., alpha) draw of `k` weights: `k` Gamma(alpha) draws over their sum
/// (float64, then float32 as torch's float tensor holds them). Where every draw underflows to
/// 0 (a tiny alpha), all the weight goes to one of them, drawn uniformly: the limit.
fn dirichlet(rng: &mut AugRng, alpha: f64, k: usize) -> Vec<f32> {
    let gamma = Gamma::new(alpha, 1.0).expect("alpha is checked positive and finite");
    let draws: Vec<f64> = (0..k).map(|_| gamma.sample(rng)).collect();
    let sum: f64 = draws.iter().sum();
    if sum > 0.0 && sum.is_finite() {
        return draws.iter().map(|g| (g / sum) as f32).collect();
    }
    let one = rng.random_range(0..k);
    (0..k).map(|i| if i == one { 1.0 } else { 0.0 }).collect()
}

/// The magnitude of a step as torchvision's `_augmentation_space(10, (height, width))` gives
/// it (float32 bins read as float64), negated for a signed operation when asked.
fn magnitude(step: &AugMixStep, width: u32, height: u32) -> f64 {
    let (m, signed) = AugmentSpace::AugMix.magnitude(step.op, AUGMIX_BINS, step.bin, width, height);
    if signed && step.negate {
        -(m as f64)
    } else {
        m as f64
    }
}

fn check_draw(draw: &AugMixDraw) -> Result<()> {
    if draw.chains.len() != draw.mixing.len() {
        return Err(Error::InvalidArgument(format!(
            "AugMix: {} chains but {} mixing weights",
            draw.chains.len(),
            draw.mixing.len()
        )));
    }
    for step in draw.chains.iter().flatten() {
        if !AUGMIX_OPS.contains(&step.op) || step.bin >= AUGMIX_BINS {
            return Err(Error::InvalidArgument(format!(
                "AugMix: {:?} at bin {} is not one of its operations with a bin below {AUGMIX_BINS}",
                step.op, step.bin
            )));
        }
    }
    Ok(())
}
