//! The image operations of AutoAugment, RandAugment and TrivialAugmentWide (`Identity` and the
//! 14 of AutoAugment), reproducing what torchvision's PIL path computes
//! (PIL's ImageEnhance blends, ImageOps look-up tables, and affine resampling: NEAREST by
//! default, BILINEAR or BICUBIC through [`AugmentOp::apply_with`]).
use super::resize::Interpolation;
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

/// PIL's `convert("L")`: ITU-R 601-2 luma in 16-bit fixed point.
fn grey_levels(img: &Image) -> Vec<u8> {
    if img.channels() == 1 {
        return img.data().to_vec();
    }
    img.data()
        .chunks_exact(3)
        .map(|p| {
            ((p[0] as u32 * 19595 + p[1] as u32 * 38470 + p[2] as u32 * 7471 + 0x8000) >> 16) as u8
        })
        .collect()
}

/// ImageEnhance.Contrast's degenerate image: the mean grey level (rounded) everywhere.
pub(super) fn mean_grey(img: &Image) -> Image {
    let grey = grey_levels(img);
    let mean = (grey.iter().map(|&v| v as f64).sum::<f64>() / grey.len().max(1) as f64 + 0.5) as u8;
    Image::from_raw(img.width(), img.height(), img.channels(), vec![mean; img.data().len()])
        .expect("same size")
}

/// The grey version in the image's own mode (`convert("L").convert(mode)`).
pub(super) fn grey_as_mode(img: &Image) -> Image {
    let grey = grey_levels(img);
    let data = if img.channels() == 3 {
        let mut rgb = vec![0u8; grey.len() * 3];
        for (px, &v) in rgb.chunks_exact_mut(3).zip(&grey) {
            px.fill(v);
        }
        rgb
    } else {
        grey
    };
    Image::from_raw(img.width(), img.height(), img.channels(), data).expect("same size")
}

/// `Image.blend(degenerate, img, alpha)` as ImageEnhance uses it: float32 arithmetic, then
/// truncation, clamped to 0..=255 (a float-to-u8 `as` cast does exactly that).
pub(super) fn blend(degenerate: &Image, img: &Image, alpha: f32) -> Image {
    let mut data = vec![0u8; img.data().len()];
    for ((o, &a), &b) in data.iter_mut().zip(degenerate.data()).zip(img.data()) {
        let (a, b) = (a as f32, b as f32);
        *o = (a + alpha * (b - a)).clamp(0.0, 255.0) as i32 as u8;
    }
    Image::from_raw(img.width(), img.height(), img.channels(), data).expect("same size")
}

/// PIL's `filter(SMOOTH)`: 3x3 kernel [[1,1,1],[1,5,1],[1,1,1]]/13, borders copied.
fn smooth(img: &Image) -> Image {
    let (w, h, c) = (img.width() as usize, img.height() as usize, img.channels() as usize);
    if w < 3 || h < 3 {
        return img.clone();
    }
    let (k1, k5) = (1.0f32 / 13.0, 5.0f32 / 13.0);
    let src = img.data();
    let stride = w * c;
    let mut out = src.to_vec();
    for y in 1..h - 1 {
        let (up, mid, down) = (
            &src[(y - 1) * stride..y * stride],
            &src[y * stride..(y + 1) * stride],
            &src[(y + 1) * stride..(y + 2) * stride],
        );
        let row_out = &mut out[y * stride..(y + 1) * stride];
        for i in c..stride - c {
            let row = |r: &[u8], kc: f32| {
                (r[i - c] as f32 * k1 + r[i] as f32 * kc) + r[i + c] as f32 * k1
            };
            let mut ss = 0.5f32;
            ss += row(down, k1);
            ss += row(mid, k5);
            ss += row(up, k1);
            row_out[i] = ss.clamp(0.0, 255.0) as i32 as u8;
        }
    }
    Image::from_raw(img.width(), img.height(), img.channels(), out).expect("same size")
}

fn map_lut(img: &Image, lut: &[u8; 256]) -> Image {
    let data = img.data().iter().map(|&v| lut[v as usize]).collect();
    Image::from_raw(img.width(), img.height(), img.channels(), data).expect("same size")
}

pub(super) fn per_channel_lut(img: &Image, make: fn(&[u64; 256]) -> [u8; 256]) -> Image {
    let c = img.channels() as usize;
    let mut hists = vec![[0u64; 256]; c];
    for px in img.data().chunks_exact(c) {
        for (hist, &v) in hists.iter_mut().zip(px) {
            hist[v as usize] += 1;
        }
    }
    let luts: Vec<[u8; 256]> = hists.iter().map(make).collect();
    let mut data = img.data().to_vec();
    for px in data.chunks_exact_mut(c) {
        for (lut, v) in luts.iter().zip(px.iter_mut()) {
            *v = lut[*v as usize];
        }
    }
    Image::from_raw(img.width(), img.height(), img.channels(), data).expect("same size")
}

/// `ImageOps.autocontrast(cutoff=0)` for one channel.
fn autocontrast_lut(hist: &[u64; 256]) -> [u8; 256] {
    let lo = hist.iter().position(|&n| n > 0);
    let hi = hist.iter().rposition(|&n| n > 0);
    match (lo, hi) {
        (Some(lo), Some(hi)) if hi > lo => {
            let scale = 255.0 / (hi - lo) as f64;
            let offset = -(lo as f64) * scale;
            std::array::from_fn(|i| ((i as f64 * scale + offset) as i64).clamp(0, 255) as u8)
        }
        _ => std::array::from_fn(|i| i as u8),
    }
}

/// `ImageOps.equalize` for one channel.
pub(super) fn equalize_lut(hist: &[u64; 256]) -> [u8; 256] {
    let used: Vec<u64> = hist.iter().copied().filter(|&n| n > 0).collect();
    let identity = std::array::from_fn(|i| i as u8);
    if used.len() <= 1 {
        return identity;
    }
    let step = (used.iter().sum::<u64>() - used[used.len() - 1]) / 255;
    if step == 0 {
        return identity;
    }
    let mut n = step / 2;
    std::array::from_fn(|i| {
        let v = (n / step).min(255) as u8;
        n += hist[i];
        v
    })
}

/// torchvision's `F.affine` on a PIL image (no rotation, scale 1) with `(translate, shear,
/// center)`: builds the inverse matrix and samples with `interpolation` and a black fill.
fn affine(
    img: &Image,
    (translate, shear, center): ((f64, f64), (f64, f64), (f64, f64)),
    interpolation: Interpolation,
) -> Image {
    let m = super::tensor_ops::inverse_affine_matrix(center, 0.0, translate, 1.0, shear);
    sample(img, &m, interpolation)
}

/// PIL's affine transform with `interpolation`: its NEAREST fast path, or the generic one.
fn sample(img: &Image, m: &[f64; 6], interpolation: Interpolation) -> Image {
    match interpolation {
        Interpolation::Nearest => sample_affine_nearest(img, m),
        other => super::pil_affine::sample_affine(img, m, other),
    }
}

/// PIL's `img.rotate(angle, filter)` (no expand, centre of the image, black fill).
fn rotate(img: &Image, degrees: f64, interpolation: Interpolation) -> Image {
    let angle = degrees.rem_euclid(360.0);
    let square = img.width() == img.height();
    match angle {
        0.0 => return img.clone(),
        180.0 => return transpose(img, |x, y, w, h| (w - 1 - x, h - 1 - y)),
        a if a == 90.0 && square => return transpose(img, |x, y, w, _| (w - 1 - y, x)),
        a if a == 270.0 && square => return transpose(img, |x, y, _, h| (y, h - 1 - x)),
        _ => {}
    }
    let (w, h) = (img.width() as f64, img.height() as f64);
    let (cx, cy) = (w / 2.0, h / 2.0);
    let t = -angle.to_radians();
    let r15 = |v: f64| format!("{v:.15}").parse::<f64>().expect("formatted float");
    let mut m = [r15(t.cos()), r15(t.sin()), 0.0, r15(-t.sin()), r15(t.cos()), 0.0];
    m[2] = m[0] * -cx + m[1] * -cy + m[2] + cx;
    m[5] = m[3] * -cx + m[4] * -cy + m[5] + cy;
    sample(img, &m, interpolation)
}

/// PIL's exact transposes (used by `rotate` for multiples of 90 degrees): `source(x, y, w, h)`
/// names the input pixel of output pixel (x, y).
fn transpose(img: &Image, source: impl Fn(i64, i64, i64, i64) -> (i64, i64)) -> Image {
    let (w, h, c) = (img.width() as i64, img.height() as i64, img.channels() as usize);
    let mut out = Image::zeros(img.width(), img.height(), img.channels());
    for y in 0..h {
        for x in 0..w {
            let (sx, sy) = source(x, y, w, h);
            let (s, d) = (((sy * w + sx) as usize) * c, ((y * w + x) as usize) * c);
            out.data_mut()[d..d + c].copy_from_slice(&img.data()[s..s + c]);
        }
    }
    out
}

/// PIL's `ImagingTransformAffine` with NEAREST: `m` maps output pixel centres to input
/// coordinates; pixels that fall outside stay black.
fn sample_affine_nearest(img: &Image, m: &[f64; 6]) -> Image {
    sample_affine_nearest_to(img, m, (img.width(), img.height()))
}

/// [`sample_affine_nearest`] into an output of `size` (width, height): also PIL's NEAREST
/// `Image.resize`, a scale-only affine transform.
pub(super) fn sample_affine_nearest_to(img: &Image, m: &[f64; 6], size: (u32, u32)) -> Image {
    let (sw, sh, c) = (img.width() as i64, img.height() as i64, img.channels() as usize);
    let (w, h) = (size.0 as i64, size.1 as i64);
    let mut out = Image::zeros(size.0, size.1, img.channels());
    let src = img.data();
    let dst = out.data_mut();
    let mut copy = |x: i64, y: i64, xi: i64, yi: i64| {
        if (0..sw).contains(&xi) && (0..sh).contains(&yi) {
            let (s, d) = (((yi * sw + xi) as usize) * c, ((y * w + x) as usize) * c);
            dst[d..d + c].copy_from_slice(&src[s..s + c]);
        }
    };
    let coord = |v: f64| if v < 0.0 { -1 } else { v as i64 };
    if m[1] == 0.0 && m[3] == 0.0 {
        // ImagingScaleAffine: separable, accumulating the step like PIL.
        let mut xs = Vec::with_capacity(w as usize);
        let mut xo = m[2] + m[0] * 0.5;
        for _ in 0..w {
            xs.push(coord(xo));
            xo += m[0];
        }
        let mut yo = m[5] + m[4] * 0.5;
        for y in 0..h {
            let yi = coord(yo);
            for (x, &xi) in xs.iter().enumerate() {
                copy(x as i64, y, xi, yi);
            }
            yo += m[4];
        }
    } else {
        // affine_fixed: 16.16 fixed point, stepped along each row like PIL.
        let fix = |v: f64| (v * 65536.0 + 0.5).floor() as i64;
        let (a0, a1, a3, a4) = (fix(m[0]), fix(m[1]), fix(m[3]), fix(m[4]));
        let a2 = fix(m[2] + m[0] * 0.5 + m[1] * 0.5);
        let a5 = fix(m[5] + m[3] * 0.5 + m[4] * 0.5);
        for y in 0..h {
            let (mut xx, mut yy) = (a2 + y * a1, a5 + y * a4);
            for x in 0..w {
                copy(x, y, xx >> 16, yy >> 16);
                xx += a0;
                yy += a3;
            }
        }
    }
    out
}
