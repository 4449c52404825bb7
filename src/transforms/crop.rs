//! Crops and flips: `CenterCrop`, `RandomResizedCrop`, `RandomHorizontalFlip` (torchvision's
//! parameters, defaults and rounding).
use rand::Rng;

use super::functional::Interpolation;
use super::resize::resize;
use super::{AugRng, Image, ImageTransform, Size};
use crate::{Error, Result};

/// `transforms.CenterCrop(size)`: zero-pads first when the crop is larger than the image.
#[derive(Clone, Copy, Debug)]
pub struct CenterCrop {
    height: u32,
    width: u32,
}

impl CenterCrop {
    /// `CenterCrop::new(224)` or `CenterCrop::new((h, w))`.
    pub fn new(size: impl Into<Size>) -> CenterCrop {
        match size.into() {
            Size::Shorter(s) => CenterCrop { height: s, width: s },
            Size::Exact { height, width } => CenterCrop { height, width },
        }
    }
}

/// Offset of a centred crop of `crop` pixels along an axis of `len` (torchvision: padding
/// `(crop - len) // 2` first when needed, then `int(round((len' - crop) / 2))`, ties to even).
fn center_offset(len: u32, crop: u32) -> i64 {
    if crop > len {
        -(((crop - len) / 2) as i64)
    } else {
        ((len - crop) as f64 / 2.0).round_ties_even() as i64
    }
}

impl ImageTransform for CenterCrop {
    fn apply_image(&self, img: Image, _rng: &mut AugRng) -> Result<Image> {
        if (img.width(), img.height()) == (self.width, self.height) {
            return Ok(img);
        }
        let left = center_offset(img.width(), self.width);
        let top = center_offset(img.height(), self.height);
        Ok(img.crop(left, top, self.width, self.height))
    }
}

/// `transforms.RandomResizedCrop(size, scale=(0.08, 1.0), ratio=(3/4, 4/3))`: crops a random
/// area and aspect ratio, then resizes it to `size` (bilinear, antialiased, unless
/// [`interpolation`](RandomResizedCrop::interpolation) says otherwise). Works on images.
#[derive(Clone, Copy, Debug)]
pub struct RandomResizedCrop {
    height: u32,
    width: u32,
    scale: (f64, f64),
    ratio: (f64, f64),
    interpolation: Interpolation,
}

impl RandomResizedCrop {
    /// Output size `size` (`224` for 224x224, or `(h, w)`) with torchvision's default scale
    /// `(0.08, 1.0)` and ratio `(3/4, 4/3)`.
    pub fn new(size: impl Into<Size>) -> RandomResizedCrop {
        let (height, width) = match size.into() {
            Size::Shorter(s) => (s, s),
            Size::Exact { height, width } => (height, width),
        };
        RandomResizedCrop {
            height,
            width,
            scale: (0.08, 1.0),
            ratio: (3.0 / 4.0, 4.0 / 3.0),
            interpolation: Interpolation::Bilinear,
        }
    }
    /// The resize's interpolation (torchvision's `interpolation=`; default bilinear).
    pub fn interpolation(mut self, interpolation: Interpolation) -> Self {
        self.interpolation = interpolation;
        self
    }
    /// Range of the crop's area as a fraction of the image's (torchvision's `scale`).
    pub fn scale(mut self, min: f64, max: f64) -> Self {
        self.scale = (min, max);
        self
    }
    /// Range of the crop's aspect ratio, width / height, sampled log-uniformly (torchvision's
    /// `ratio`).
    pub fn ratio(mut self, min: f64, max: f64) -> Self {
        self.ratio = (min, max);
        self
    }

    /// The crop box `(top, left, height, width)`: up to 10 random tries, then torchvision's
    /// fallback (the whole image clamped to the ratio range, centred). The draws come from
    /// `rng`; [`RandomResizedCrop::params_from_uniform`] says how they are used.
    pub fn params(&self, width: u32, height: u32, rng: &mut AugRng) -> (u32, u32, u32, u32) {
        self.params_from_uniform(width, height, || rng.random::<f64>())
    }

    /// torchvision's `RandomResizedCrop.get_params` step for step, fed uniform draws in
    /// `[0, 1)` by `uniform`. Each of up to 10 tries takes one draw `u` for the area fraction
    /// and one for the log-ratio, turned into float32 values as torch's CPU `uniform_(a, b)`
    /// does (`x * (b - a) + a` in float32, `x` being `u` cut to 24 bits), with `log(ratio)`
    /// computed in float32 like `torch.log(torch.tensor(ratio))` and `exp` in float32; then
    /// `w = round(sqrt(area * scale * aspect))`, `h = round(sqrt(area * scale / aspect))` (ties
    /// to even, Python's `round`); an accepted try (`0 < w <= width`, `0 < h <= height`) takes
    /// two more draws for `top` and `left` (`floor(u * n)` for torch's `randint(0, n)`).
    /// Ten rejected tries fall back to a centred crop of the whole image, clamped to the ratio
    /// range.
    pub fn params_from_uniform(
        &self,
        width: u32,
        height: u32,
        mut uniform: impl FnMut() -> f64,
    ) -> (u32, u32, u32, u32) {
        let (w_img, h_img) = (width as f64, height as f64);
        let area = w_img * h_img;
        // torch's `uniform_real`: 24 random bits, then `x * (to - from) + from` in float32.
        let draw = |u: f64, lo: f32, hi: f32| {
            ((u * 16777216.0).floor() / 16777216.0) as f32 * (hi - lo) + lo
        };
        let randint = |u: f64, n: u32| ((u * n as f64).floor() as u32).min(n - 1);
        let (scale_lo, scale_hi) = (self.scale.0 as f32, self.scale.1 as f32);
        let (log_lo, log_hi) = ((self.ratio.0 as f32).ln(), (self.ratio.1 as f32).ln());
        for _ in 0..10 {
            let target_area = area * draw(uniform(), scale_lo, scale_hi) as f64;
            let aspect = draw(uniform(), log_lo, log_hi).exp() as f64;
            let w = (target_area * aspect).sqrt().round_ties_even();
            let h = (target_area / aspect).sqrt().round_ties_even();
            if w > 0.0 && w <= w_img && h > 0.0 && h <= h_img {
                let (w, h) = (w as u32, h as u32);
                let top = randint(uniform(), height - h + 1);
                let left = randint(uniform(), width - w + 1);
                return (top, left, h, w);
            }
        }
        let in_ratio = w_img / h_img;
        let (min_ratio, max_ratio) =
            (self.ratio.0.min(self.ratio.1), self.ratio.0.max(self.ratio.1));
        let (w, h) = if in_ratio < min_ratio {
            (width, (w_img / min_ratio).round_ties_even() as u32)
        } else if in_ratio > max_ratio {
            ((h_img * max_ratio).round_ties_even() as u32, height)
        } else {
            (width, height)
        };
        ((height - h) / 2, (width - w) / 2, h, w)
    }
}

impl ImageTransform for RandomResizedCrop {
    fn apply_image(&self, img: Image, rng: &mut AugRng) -> Result<Image> {
        if img.width() == 0 || img.height() == 0 {
            return Err(Error::InvalidArgument("RandomResizedCrop of an empty image".into()));
        }
        let (top, left, h, w) = self.params(img.width(), img.height(), rng);
        let cropped = img.crop(left as i64, top as i64, w, h);
        resize(cropped, self.width, self.height, self.interpolation)
    }
}

/// `transforms.RandomHorizontalFlip(p=0.5)`: mirrors the image left-right with probability
/// `p` (`Default`: 0.5). Works on images.
#[derive(Clone, Copy, Debug)]
pub struct RandomHorizontalFlip {
    p: f64,
}

impl RandomHorizontalFlip {
    /// Flips with probability `p` (0: never, 1: always).
    pub fn new(p: f64) -> RandomHorizontalFlip {
        RandomHorizontalFlip { p }
    }
}

impl Default for RandomHorizontalFlip {
    fn default() -> Self {
        RandomHorizontalFlip { p: 0.5 }
    }
}

impl ImageTransform for RandomHorizontalFlip {
    fn apply_image(&self, img: Image, rng: &mut AugRng) -> Result<Image> {
        Ok(if rng.random::<f64>() < self.p { img.flip_horizontal() } else { img })
    }
}

#[cfg(test)]
mod tests {
    use super::super::aug_rng;
    use super::*;

    #[test]
    fn center_offsets_round_half_to_even() {
        assert_eq!(center_offset(257, 224), 16);
        assert_eq!(center_offset(255, 224), 16);
        assert_eq!(center_offset(200, 224), -12);
    }

    #[test]
    fn random_resized_crop_stays_inside_and_is_seeded() {
        let rrc = RandomResizedCrop::new(32);
        for i in 0..200 {
            let (t, l, h, w) = rrc.params(640, 480, &mut aug_rng(1, 0, i));
            assert!(h > 0 && w > 0 && t + h <= 480 && l + w <= 640);
            assert_eq!((t, l, h, w), rrc.params(640, 480, &mut aug_rng(1, 0, i)));
        }
        // An extreme image forces the fallback: the ratio clamps to 4/3.
        let (t, l, h, w) =
            RandomResizedCrop::new(8).scale(1.0, 1.0).params(1000, 10, &mut aug_rng(0, 0, 0));
        assert_eq!((t, h, w, l), (0, 10, 13, (1000 - 13) / 2));
    }
}
