//! MixUp and CutMix on a whole batch, as torchvision's `transforms.v2.MixUp`, `v2.CutMix` and
//! the classification reference's `RandomChoice([MixUp, CutMix])` compute them: each sample is
//! mixed with the one before it in the batch (`roll(1, 0)`), and the labels become class
//! probabilities mixed in the same proportion. The draws (which of the two, the Beta-distributed
//! weight, CutMix's box centre) come from an [`AugRng`], so a batch mixes the same way on any
//! thread and after a resume ([`batch_rng`]).
use rand::Rng;
use rand_distr::{Beta, Distribution};
use tch::{Kind, Tensor};

use super::AugRng;
use crate::{Error, Result};

/// What one batch's mixing drew: torchvision's `make_params` for MixUp or CutMix.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MixDraw {
    /// MixUp with weight `lam`: `lam * x + (1 - lam) * x.roll(1, 0)`, the labels likewise.
    MixUp {
        /// The weight of each sample itself, from Beta(alpha, alpha).
        lam: f64,
    },
    /// CutMix: the box `x1..x2` by `y1..y2` (columns, rows) of each image replaced by the
    /// previous sample's; the labels mixed by `lam_adjusted`, the share of the image kept.
    CutMix {
        /// The box `(x1, y1, x2, y2)`, end-exclusive, clipped to the image.
        boxed: (i64, i64, i64, i64),
        /// `1 - box area / image area`.
        lam_adjusted: f64,
    },
}

/// CutMix's box for weight `lam` centred on pixel `(cx, cy)` of a `height` x `width` image, as
/// torchvision's `CutMix.make_params` computes it from its draws: half-sides
/// `int(0.5 * sqrt(1 - lam) * side)`, clipped to the image, and the share of the image kept.
pub fn cutmix_box(lam: f64, (cx, cy): (i64, i64), height: i64, width: i64) -> MixDraw {
    let r = 0.5 * (1.0 - lam).sqrt();
    // Python's int() truncates toward zero; the products are not negative.
    let (half_w, half_h) = ((r * width as f64) as i64, (r * height as f64) as i64);
    let (x1, y1) = ((cx - half_w).max(0), (cy - half_h).max(0));
    let (x2, y2) = ((cx + half_w).min(width), (cy + half_h).min(height));
    let area = ((x2 - x1) * (y2 - y1)) as f64 / (width * height) as f64;
    MixDraw::CutMix { boxed: (x1, y1, x2, y2), lam_adjusted: 1.0 - area }
}

/// torchvision's classification recipe's batch mixing (`--mixup-alpha`, `--cutmix-alpha`): each
/// batch is mixed by MixUp or by CutMix, chosen with equal chance when both alphas are above 0.
/// Labels `[B]` (class indices) become probabilities `[B, num_classes]`; float targets `[B, C]`
/// are mixed as they are.
///
/// ```
/// use tch::{Device, Kind, Tensor};
/// use trainbook::transforms::{aug_rng, MixUpCutMix};
/// let mix = MixUpCutMix::new(0.2, 1.0, 10)?;
/// let images = Tensor::rand([4, 3, 8, 8], (Kind::Float, Device::Cpu));
/// let labels = Tensor::from_slice(&[1i64, 2, 3, 4]);
/// let draw = mix.draw(&mut aug_rng(0, 0, 0), 8, 8);
/// let (mixed, probabilities) = mix.apply(&draw, &images, &labels)?;
/// assert_eq!(probabilities.size(), [4, 10]);
/// # Ok::<(), trainbook::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct MixUpCutMix {
    mixup: Option<Beta<f64>>,
    cutmix: Option<Beta<f64>>,
    alphas: (f64, f64),
    num_classes: usize,
}

impl MixUpCutMix {
    /// MixUp with Beta(`mixup_alpha`, `mixup_alpha`) and CutMix with Beta(`cutmix_alpha`,
    /// `cutmix_alpha`); an alpha of 0 leaves that one out (torchvision's reference). An error
    /// when both are 0, an alpha is negative or not finite, or `num_classes` is 0.
    pub fn new(mixup_alpha: f64, cutmix_alpha: f64, num_classes: usize) -> Result<Self> {
        let beta = |name: &str, a: f64| -> Result<Option<Beta<f64>>> {
            if !(a.is_finite() && a >= 0.0) {
                return Err(Error::InvalidArgument(format!("{name} {a}: must be 0 or more")));
            }
            (a > 0.0)
                .then(|| {
                    Beta::new(a, a).map_err(|e| Error::InvalidArgument(format!("{name} {a}: {e}")))
                })
                .transpose()
        };
        let (mixup, cutmix) =
            (beta("mixup_alpha", mixup_alpha)?, beta("cutmix_alpha", cutmix_alpha)?);
        if mixup.is_none() && cutmix.is_none() {
            return Err(Error::InvalidArgument(
                "MixUpCutMix: mixup_alpha and cutmix_alpha are both 0 (nothing to mix)".into(),
            ));
        }
        if num_classes == 0 {
            return Err(Error::InvalidArgument("MixUpCutMix: num_classes is 0".into()));
        }
        Ok(MixUpCutMix { mixup, cutmix, alphas: (mixup_alpha, cutmix_alpha), num_classes })
    }

    /// `(mixup_alpha, cutmix_alpha)`.
    pub fn alphas(&self) -> (f64, f64) {
        self.alphas
    }

    /// The classes the labels are spread over.
    pub fn num_classes(&self) -> usize {
        self.num_classes
    }

    /// The draws for a batch of `height` x `width` images: MixUp or CutMix (each with chance
    /// 1/2 when both are on), the weight from the Beta distribution, and for CutMix a box
    /// centre uniform over the pixels with half-sides `int(0.5 * sqrt(1 - lam) * side)`.
    pub fn draw(&self, rng: &mut AugRng, height: i64, width: i64) -> MixDraw {
        let use_cutmix = match (&self.mixup, &self.cutmix) {
            (Some(_), Some(_)) => rng.random_bool(0.5),
            (None, _) => true,
            (Some(_), None) => false,
        };
        if !use_cutmix {
            let lam = self.mixup.as_ref().expect("MixUp is on").sample(rng);
            return MixDraw::MixUp { lam };
        }
        let lam = self.cutmix.as_ref().expect("CutMix is on").sample(rng);
        let (cx, cy) = (rng.random_range(0..width.max(1)), rng.random_range(0..height.max(1)));
        cutmix_box(lam, (cx, cy), height, width)
    }

    /// The mixed batch: `images` `[B, C, H, W]` (float) and the labels as probabilities
    /// `[B, num_classes]` (float32), from class indices `[B]` (int64) or float targets
    /// `[B, num_classes]`, with torchvision's operations (so the same draws give the same bits).
    pub fn apply(
        &self,
        draw: &MixDraw,
        images: &Tensor,
        labels: &Tensor,
    ) -> Result<(Tensor, Tensor)> {
        let b = images.size().first().copied().unwrap_or(0);
        if images.dim() != 4 || labels.size().first() != Some(&b) {
            return Err(Error::InvalidArgument(format!(
                "MixUp/CutMix: a batch of images [B, C, H, W] and labels [B] or [B, {}] was \
                 expected, got images {:?} and labels {:?}",
                self.num_classes,
                images.size(),
                labels.size()
            )));
        }
        let labels = match labels.dim() {
            1 => {
                let top = labels.max().int64_value(&[]);
                if labels.kind() != Kind::Int64
                    || labels.min().int64_value(&[]) < 0
                    || top >= self.num_classes as i64
                {
                    return Err(Error::InvalidArgument(format!(
                        "MixUp/CutMix: class indices must be int64 in 0..{}; got {:?} up to {top}",
                        self.num_classes,
                        labels.kind()
                    )));
                }
                labels.one_hot(self.num_classes as i64).to_kind(Kind::Float)
            }
            2 if labels.size()[1] == self.num_classes as i64 => labels.to_kind(Kind::Float),
            _ => {
                return Err(Error::InvalidArgument(format!(
                "MixUp/CutMix: labels {:?} are neither [B] class indices nor [B, {}] probabilities",
                labels.size(),
                self.num_classes
            )))
            }
        };
        let mix_labels = |lam: f64| -> Tensor {
            let mut rolled = labels.roll([1], [0]);
            let _ = rolled.g_mul_scalar_(1.0 - lam);
            let _ = rolled.g_add_(&labels.g_mul_scalar(lam));
            rolled
        };
        match *draw {
            MixDraw::MixUp { lam } => {
                let mut out = images.roll([1], [0]);
                let _ = out.g_mul_scalar_(1.0 - lam);
                let _ = out.g_add_(&images.g_mul_scalar(lam));
                Ok((out, mix_labels(lam)))
            }
            MixDraw::CutMix { boxed: (x1, y1, x2, y2), lam_adjusted } => {
                let rolled = images.roll([1], [0]);
                let out = images.copy();
                let window = |t: &Tensor| t.narrow(2, y1, y2 - y1).narrow(3, x1, x2 - x1);
                window(&out).copy_(&window(&rolled));
                Ok((out, mix_labels(lam_adjusted)))
            }
        }
    }
}
