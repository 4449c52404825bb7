//! The image operations of AutoAugment, RandAugment and TrivialAugmentWide (`Identity` and the
//! 14 of AutoAugment), reproducing what torchvision's PIL path computes
//! (PIL's ImageEnhance blends, ImageOps look-up tables, and affine resampling: NEAREST by
//! default, BILINEAR or BICUBIC through [`AugmentOp::apply_with`]).
use super::functional::{
    affine, autocontrast_lut, blend, equalize_lut, grey_as_mode, map_lut, mean_grey,
    per_channel_lut, rotate, smooth, Interpolation,
};
use super::Image;

/// One AutoAugment operation; its magnitude is interpreted as torchvision's `_apply_op` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AugmentOp {
    /// The image as it is (RandAugment's and TrivialAugmentWide's `Identity`).
    Identity,
    /// Horizontal shear by `atan(magnitude)` degrees about the top-left corner (`F.affine`).
    ShearX,
    /// Vertical shear by `atan(magnitude)` degrees about the top-left corner (`F.affine`).
    ShearY,
    /// Shift right by `magnitude` pixels (truncated to an integer; negative: left).
    TranslateX,
    /// Shift down by `magnitude` pixels (truncated to an integer; negative: up).
    TranslateY,
    /// Rotation by `magnitude` degrees counter-clockwise about the centre (`F.rotate`).
    Rotate,
    /// Brightness factor `1 + magnitude` (`F.adjust_brightness`: a blend with black).
    Brightness,
    /// Saturation factor `1 + magnitude` (`F.adjust_saturation`: a blend with the grey image).
    Color,
    /// Contrast factor `1 + magnitude` (`F.adjust_contrast`: a blend with the mean grey level).
    Contrast,
    /// Sharpness factor `1 + magnitude` (`F.adjust_sharpness`: a blend with a smoothed image).
    Sharpness,
    /// Keeps the `magnitude` highest bits of each value (`F.posterize`; clamped to 0..=8).
    Posterize,
    /// Inverts the values at or above the threshold `magnitude` (`F.solarize`).
    Solarize,
    /// Stretches each channel to the full 0-255 range (`F.autocontrast`); no magnitude.
    AutoContrast,
    /// Equalises each channel's histogram (`F.equalize`); no magnitude.
    Equalize,
    /// `255 - value` (`F.invert`); no magnitude.
    Invert,
}

impl AugmentOp {
    /// Applies the operation with `magnitude` (degrees, pixels, enhancement offset, bits or
    /// threshold, depending on the operation), resampling NEAREST (torchvision's default).
    pub fn apply(self, img: &Image, magnitude: f32) -> Image {
        self.apply_with(img, magnitude, Interpolation::Nearest)
    }

    /// [`apply`](Self::apply) with the rotations, shears and translations resampled with
    /// `interpolation`, as torchvision passes its `interpolation` to `F.affine` and `F.rotate`
    /// (PIL's generic transform for BILINEAR and BICUBIC); the other operations ignore it.
    pub fn apply_with(self, img: &Image, magnitude: f32, interpolation: Interpolation) -> Image {
        let m = magnitude as f64;
        let affine = |img: &Image, t: (f64, f64), s: (f64, f64), c: (f64, f64)| {
            affine(img, (t, s, c), interpolation)
        };
        let (w, h) = (img.width() as f64, img.height() as f64);
        match self {
            AugmentOp::Identity => img.clone(),
            AugmentOp::ShearX => affine(img, (0.0, 0.0), (m.atan().to_degrees(), 0.0), (0.0, 0.0)),
            AugmentOp::ShearY => affine(img, (0.0, 0.0), (0.0, m.atan().to_degrees()), (0.0, 0.0)),
            AugmentOp::TranslateX => affine(img, (m.trunc(), 0.0), (0.0, 0.0), (w * 0.5, h * 0.5)),
            AugmentOp::TranslateY => affine(img, (0.0, m.trunc()), (0.0, 0.0), (w * 0.5, h * 0.5)),
            AugmentOp::Rotate => rotate(img, m, interpolation),
            AugmentOp::Brightness => blend(
                &Image::zeros(img.width(), img.height(), img.channels()),
                img,
                1.0 + magnitude,
            ),
            AugmentOp::Color => blend(&grey_as_mode(img), img, 1.0 + magnitude),
            AugmentOp::Contrast => blend(&mean_grey(img), img, 1.0 + magnitude),
            AugmentOp::Sharpness => blend(&smooth(img), img, 1.0 + magnitude),
            AugmentOp::Posterize => {
                let bits = (magnitude as i64).clamp(0, 8) as u32;
                let mask = !((1u16 << (8 - bits)) - 1) as u8;
                map_lut(img, &std::array::from_fn(|i| i as u8 & mask))
            }
            AugmentOp::Solarize => map_lut(
                img,
                &std::array::from_fn(|i| if (i as f64) < m { i as u8 } else { 255 - i as u8 }),
            ),
            AugmentOp::AutoContrast => per_channel_lut(img, autocontrast_lut),
            AugmentOp::Equalize => per_channel_lut(img, equalize_lut),
            AugmentOp::Invert => map_lut(img, &std::array::from_fn(|i| 255 - i as u8)),
        }
    }
}
