//! Crops and flips: `CenterCrop`, `RandomResizedCrop`, `RandomHorizontalFlip` (torchvision's
//! parameters, defaults and rounding).
use rand::Rng;

use super::resize::resize_bilinear;
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
/// area and aspect ratio, then resizes it to `size` (bilinear, antialiased). Works on images.
#[derive(Clone, Copy, Debug)]
pub struct RandomResizedCrop {
    height: u32,
    width: u32,
    scale: (f64, f64),
    ratio: (f64, f64),
}

impl RandomResizedCrop {
    /// Output size `size` (`224` for 224x224, or `(h, w)`) with torchvision's default scale
    /// `(0.08, 1.0)` and ratio `(3/4, 4/3)`.
    pub fn new(size: impl Into<Size>) -> RandomResizedCrop {
        let (height, width) = match size.into() {
            Size::Shorter(s) => (s, s),
            Size::Exact { height, width } => (height, width),
        };
        RandomResizedCrop { height, width, scale: (0.08, 1.0), ratio: (3.0 / 4.0, 4.0 / 3.0) }
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
    /// fallback (the whole image clamped to the ratio range, centred).
    pub fn params(&self, width: u32, height: u32, rng: &mut AugRng) -> (u32, u32, u32, u32) {
        let (w_img, h_img) = (width as f64, height as f64);
        let area = w_img * h_img;
        let (log_lo, log_hi) = (self.ratio.0.ln(), self.ratio.1.ln());
        for _ in 0..10 {
            let target_area = area * rng.random_range(self.scale.0..=self.scale.1);
            let aspect = rng.random_range(log_lo..=log_hi).exp();
            let w = (target_area * aspect).sqrt().round_ties_even();
            let h = (target_area / aspect).sqrt().round_ties_even();
            if w > 0.0 && w <= w_img && h > 0.0 && h <= h_img {
                let (w, h) = (w as u32, h as u32);
                let top = rng.random_range(0..=height - h);
                let left = rng.random_range(0..=width - w);
                return (top, left, h, w);
            }
        }
        let in_ratio = w_img / h_img;
        let (w, h) = if in_ratio < self.ratio.0 {
            (width, (w_img / self.ratio.0).round_ties_even() as u32)
        } else if in_ratio > self.ratio.1 {
            ((h_img * self.ratio.1).round_ties_even() as u32, height)
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
        resize_bilinear(cropped, self.width, self.height)
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
