//! `Resize`: bilinear resampling with antialiasing, as torchvision does through PIL (the
//! filter support widens with the scale factor when shrinking). The resampling itself is
//! `fast_image_resize`'s SIMD convolution with the bilinear (triangle) filter.
use fast_image_resize::images::Image as FrImage;
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};

use super::functional::Interpolation;
use super::{AugRng, Image, ImageTransform};
use crate::{Error, Result};

/// Target size of [`Resize`]: torchvision's `int` (shorter side) or `(h, w)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    /// The shorter side becomes this long; the aspect ratio is kept.
    Shorter(u32),
    /// Exactly `height` x `width`.
    Exact {
        /// Output height in pixels.
        height: u32,
        /// Output width in pixels.
        width: u32,
    },
}

impl From<u32> for Size {
    fn from(side: u32) -> Size {
        Size::Shorter(side)
    }
}

impl From<(u32, u32)> for Size {
    fn from((height, width): (u32, u32)) -> Size {
        Size::Exact { height, width }
    }
}

impl Size {
    /// The output (width, height) for an input of `width` x `height`, as torchvision computes
    /// it (the longer side of [`Size::Shorter`] is truncated: `int(size * long / short)`).
    pub fn output(self, width: u32, height: u32) -> (u32, u32) {
        match self {
            Size::Exact { height: h, width: w } => (w, h),
            Size::Shorter(s) => {
                let (short, long) = if width <= height { (width, height) } else { (height, width) };
                let new_long = (s as u64 * long as u64 / short.max(1) as u64) as u32;
                if width <= height {
                    (s, new_long)
                } else {
                    (new_long, s)
                }
            }
        }
    }
}

/// `transforms.Resize(size)` with bilinear interpolation and antialiasing (torchvision's
/// defaults on PIL images; [`Resize::interpolation`] for the others). Works on images: put it
/// before `ToTensor`.
#[derive(Clone, Copy, Debug)]
pub struct Resize {
    size: Size,
    interpolation: Interpolation,
}

impl Resize {
    /// `Resize::new(256)` resizes the shorter side to 256; `Resize::new((244, 244))` to 244x244.
    pub fn new(size: impl Into<Size>) -> Resize {
        Resize { size: size.into(), interpolation: Interpolation::Bilinear }
    }
    /// The same resize with `interpolation` (torchvision's `interpolation=`).
    pub fn interpolation(mut self, interpolation: Interpolation) -> Resize {
        self.interpolation = interpolation;
        self
    }
}

impl ImageTransform for Resize {
    fn apply_image(&self, img: Image, _rng: &mut AugRng) -> Result<Image> {
        let (w, h) = self.size.output(img.width(), img.height());
        resize(img, w, h, self.interpolation)
    }
}

/// Resizes `img` to `width` x `height` (PIL's antialiased BILINEAR). Same size: returned as is.
/// Errors: [`Error::InvalidArgument`] for a zero width or height.
pub fn resize_bilinear(img: Image, width: u32, height: u32) -> Result<Image> {
    resize(img, width, height, Interpolation::Bilinear)
}

/// Resizes `img` to `width` x `height` with `interpolation`, as PIL's `Image.resize` with that
/// filter (what torchvision's `F.resize` calls on PIL images): bilinear within one level of
/// PIL's, nearest PIL's own pixel choice (its scale-only affine transform), bicubic PIL's bytes.
/// Same size: returned as is.
/// Errors: [`Error::InvalidArgument`] for a zero width or height.
pub fn resize(img: Image, width: u32, height: u32, interpolation: Interpolation) -> Result<Image> {
    if width == 0 || height == 0 {
        return Err(Error::InvalidArgument(format!("resize to {width}x{height}")));
    }
    if (img.width(), img.height()) == (width, height) {
        return Ok(img);
    }
    if interpolation == Interpolation::Nearest {
        // PIL resizes with NEAREST as the affine transform that scales the box onto the output.
        let (sx, sy) = (img.width() as f64 / width as f64, img.height() as f64 / height as f64);
        let m = [sx, 0.0, 0.0, 0.0, sy, 0.0];
        return Ok(super::functional::sample_affine_nearest_to(&img, &m, (width, height)));
    }
    if interpolation == Interpolation::Bicubic {
        return super::functional::resample(&img, width, height, super::functional::BICUBIC);
    }
    let channels = img.channels();
    let pixel_type = if channels == 3 { PixelType::U8x3 } else { PixelType::U8 };
    let (sw, sh) = (img.width(), img.height());
    let src = FrImage::from_vec_u8(sw, sh, img.into_raw(), pixel_type)
        .map_err(|e| Error::InvalidArgument(format!("resize source {sw}x{sh}: {e}")))?;
    let mut dst = FrImage::new(width, height, pixel_type);
    let options = ResizeOptions::new().resize_alg(ResizeAlg::Convolution(FilterType::Bilinear));
    Resizer::new().resize(&src, &mut dst, &options).map_err(|e| {
        Error::InvalidArgument(format!("resize {sw}x{sh} -> {width}x{height}: {e}"))
    })?;
    Image::from_raw(width, height, channels, dst.into_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shorter_side_keeps_aspect_like_torchvision() {
        assert_eq!(Size::from(256).output(500, 375), (341, 256));
        assert_eq!(Size::from(256).output(375, 500), (256, 341));
        assert_eq!(Size::from((244, 200)).output(640, 480), (200, 244));
    }

    #[test]
    fn constant_image_stays_constant() {
        let img = Image::from_raw(7, 5, 3, vec![77; 105]).unwrap();
        let out = resize_bilinear(img, 3, 9).unwrap();
        assert_eq!((out.width(), out.height()), (3, 9));
        assert!(out.data().iter().all(|&v| v == 77));
    }
}
