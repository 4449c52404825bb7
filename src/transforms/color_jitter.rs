//! `ColorJitter`: brightness, contrast, saturation and hue changed by random factors in a
//! random order, as torchvision's `transforms.ColorJitter` does to a PIL image (PIL's
//! ImageEnhance blends, and for the hue PIL's own RGB-HSV conversion with the hue channel
//! shifted modulo 256).
use rand::seq::SliceRandom;
use rand::Rng;

use super::functional::{blend, grey_as_mode, mean_grey};
use super::{AugRng, Image, ImageTransform};
use crate::{Error, Result};

/// What one application of [`ColorJitter`] drew: the order of the four adjustments (0
/// brightness, 1 contrast, 2 saturation, 3 hue; torchvision's `fn_idx`) and each factor (`None`:
/// that adjustment is off).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JitterDraw {
    /// The order in which the adjustments are applied.
    pub order: [usize; 4],
    /// Brightness factor (0: black, 1: unchanged).
    pub brightness: Option<f32>,
    /// Contrast factor (0: the mean grey, 1: unchanged).
    pub contrast: Option<f32>,
    /// Saturation factor (0: grey, 1: unchanged).
    pub saturation: Option<f32>,
    /// Hue shift in turns, in [-0.5, 0.5].
    pub hue: Option<f32>,
}

/// torchvision's `ColorJitter(brightness, contrast, saturation, hue)` on images: each factor
/// drawn uniformly from its range, the four adjustments applied in a random order.
///
/// ```
/// use trainbook::transforms::{aug_rng, ColorJitter, Image, ImageTransform};
/// let jitter = ColorJitter::new(0.4, 0.4, 0.4, 0.1)?; // torchvision's ColorJitter(0.4, 0.4, 0.4, 0.1)
/// let img = Image::from_raw(2, 1, 3, vec![200, 30, 40, 10, 250, 90])?;
/// let out = jitter.apply_image(img, &mut aug_rng(0, 0, 3))?;
/// assert_eq!((out.width(), out.height()), (2, 1));
/// # Ok::<(), trainbook::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ColorJitter {
    ranges: [Option<(f32, f32)>; 4],
}

impl ColorJitter {
    /// Factors from `[max(0, 1 - b), 1 + b]` for brightness, contrast and saturation and from
    /// `[-h, h]` for the hue (torchvision's single-number form); 0 turns an adjustment off. An
    /// error for a negative value or a hue above 0.5.
    pub fn new(brightness: f32, contrast: f32, saturation: f32, hue: f32) -> Result<Self> {
        let around = |name: &str, v: f32, centre: f32| -> Result<(f32, f32)> {
            if !(v >= 0.0 && v.is_finite()) {
                return Err(Error::InvalidArgument(format!(
                    "ColorJitter {name} {v}: a single number must be 0 or more"
                )));
            }
            Ok(if centre == 1.0 { ((1.0 - v).max(0.0), 1.0 + v) } else { (-v, v) })
        };
        ColorJitter::with_ranges(
            around("brightness", brightness, 1.0)?,
            around("contrast", contrast, 1.0)?,
            around("saturation", saturation, 1.0)?,
            around("hue", hue, 0.0)?,
        )
    }

    /// Each factor from its own `(min, max)` range (torchvision's tuple form): brightness,
    /// contrast and saturation at least 0, the hue within [-0.5, 0.5]; a range that is just the
    /// identity ((1, 1), or (0, 0) for the hue) turns that adjustment off.
    pub fn with_ranges(
        brightness: (f32, f32),
        contrast: (f32, f32),
        saturation: (f32, f32),
        hue: (f32, f32),
    ) -> Result<Self> {
        let check = |name: &str, (lo, hi): (f32, f32), bound: (f32, f32), centre: f32| {
            if !(bound.0 <= lo && lo <= hi && hi <= bound.1) {
                return Err(Error::InvalidArgument(format!(
                    "ColorJitter {name} ({lo}, {hi}): must lie within ({}, {}) with min <= max",
                    bound.0, bound.1
                )));
            }
            Ok((lo != centre || hi != centre).then_some((lo, hi)))
        };
        let open = (0.0, f32::INFINITY);
        Ok(ColorJitter {
            ranges: [
                check("brightness", brightness, open, 1.0)?,
                check("contrast", contrast, open, 1.0)?,
                check("saturation", saturation, open, 1.0)?,
                check("hue", hue, (-0.5, 0.5), 0.0)?,
            ],
        })
    }

    /// The draws of one application: a random order of the four, and each factor uniform in
    /// its range.
    pub fn draw(&self, rng: &mut AugRng) -> JitterDraw {
        let mut order = [0, 1, 2, 3];
        order.shuffle(rng);
        let mut factor = |k: usize| {
            self.ranges[k].map(|(lo, hi)| if lo == hi { lo } else { rng.random_range(lo..hi) })
        };
        let (brightness, contrast, saturation, hue) = (factor(0), factor(1), factor(2), factor(3));
        JitterDraw { order, brightness, contrast, saturation, hue }
    }

    /// `img` adjusted as `draw` says, with torchvision's PIL functions' arithmetic
    /// (`adjust_brightness`, `adjust_contrast`, `adjust_saturation`, `adjust_hue`).
    pub fn apply_draw(img: &Image, draw: &JitterDraw) -> Image {
        let mut img = img.clone();
        for k in draw.order {
            img = match (k, draw.brightness, draw.contrast, draw.saturation, draw.hue) {
                (0, Some(f), ..) => {
                    blend(&Image::zeros(img.width(), img.height(), img.channels()), &img, f)
                }
                (1, _, Some(f), ..) => blend(&mean_grey(&img), &img, f),
                (2, _, _, Some(f), _) => blend(&grey_as_mode(&img), &img, f),
                (3, .., Some(h)) => adjust_hue(&img, h),
                _ => img,
            };
        }
        img
    }
}

impl ImageTransform for ColorJitter {
    fn apply_image(&self, img: Image, rng: &mut AugRng) -> Result<Image> {
        let draw = self.draw(rng);
        Ok(ColorJitter::apply_draw(&img, &draw))
    }
}

/// torchvision's PIL `adjust_hue`: the image to HSV (PIL's conversion), the hue channel plus
/// `int32(hue * 255)` modulo 256, back to RGB. A one-channel image is returned as it is.
pub fn adjust_hue(img: &Image, hue: f32) -> Image {
    if img.channels() != 3 {
        return img.clone();
    }
    // np.int32(hue_factor * 255) (the factor a Python float: the f32 widened), then uint8.
    let shift = ((hue as f64 * 255.0) as i32) as u8;
    let mut out = img.clone();
    for px in out.data_mut().chunks_exact_mut(3) {
        let [h, s, v] = rgb_to_hsv([px[0], px[1], px[2]]);
        px.copy_from_slice(&hsv_to_rgb([h.wrapping_add(shift), s, v]));
    }
    out
}

/// PIL's RGB to HSV conversion of one pixel (Convert.c's `rgb2hsv_row`, following Python's
/// colorsys), with its mix of float and double arithmetic.
fn rgb_to_hsv([r, g, b]: [u8; 3]) -> [u8; 3] {
    let (maxc, minc) = (r.max(g).max(b), r.min(g).min(b));
    if maxc == minc {
        return [0, 0, maxc];
    }
    let cr = (maxc - minc) as f32;
    let s = cr / maxc as f32;
    let (rc, gc, bc) = ((maxc - r) as f32 / cr, (maxc - g) as f32 / cr, (maxc - b) as f32 / cr);
    let h: f32 = if r == maxc {
        bc - gc
    } else if g == maxc {
        (2.0 + rc as f64 - bc as f64) as f32
    } else {
        (4.0 + gc as f64 - rc as f64) as f32
    };
    let h = ((h as f64 / 6.0 + 1.0) % 1.0) as f32;
    let clip8 = |x: f64| (x as i32).clamp(0, 255) as u8;
    [clip8(h as f64 * 255.0), clip8(s as f64 * 255.0), maxc]
}

/// PIL's HSV to RGB conversion of one pixel (Convert.c's `hsv2rgb`).
fn hsv_to_rgb([h, s, v]: [u8; 3]) -> [u8; 3] {
    if s == 0 {
        return [v, v, v];
    }
    let i = (h as f32 as f64 * 6.0 / 255.0).floor() as i32;
    let f = (h as f32 as f64 * 6.0 / 255.0 - i as f32 as f64) as f32;
    let fs = (s as f32 as f64 / 255.0) as f32;
    let vf = v as f32 as f64;
    let clip8 = |x: f64| (x as i32).clamp(0, 255) as u8;
    let p = clip8((vf * (1.0 - fs as f64)).round());
    let q = clip8((vf * (1.0 - (fs * f) as f64)).round());
    let t = clip8((vf * (1.0 - fs as f64 * (1.0 - f as f64))).round());
    match i % 6 {
        0 => [v, t, p],
        1 => [q, v, p],
        2 => [p, v, t],
        3 => [p, q, v],
        4 => [t, p, v],
        _ => [v, p, q],
    }
}
