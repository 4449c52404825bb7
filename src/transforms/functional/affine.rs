//! PIL's geometric kernels on an [`Image`], as torchvision's `F.affine` and `F.rotate` run them
//! on a PIL picture: the inverse matrix torchvision builds
//! ([`inverse_affine_matrix`]), PIL's NEAREST fast path (also its NEAREST `Image.resize`), its
//! exact transposes for quarter turns, and the BILINEAR and BICUBIC filters of
//! [`affine_filters`](super::affine_filters).
use super::Interpolation;
use crate::transforms::image::Image;

/// `F._get_inverse_affine_matrix(center, angle, translate, scale, shear)` (degrees), in the
/// same order of float64 operations.
pub(crate) fn inverse_affine_matrix(
    center: (f64, f64),
    angle: f64,
    translate: (f64, f64),
    scale: f64,
    shear: (f64, f64),
) -> [f64; 6] {
    let (rot, sx, sy) = (angle.to_radians(), shear.0.to_radians(), shear.1.to_radians());
    let ((cx, cy), (tx, ty)) = (center, translate);
    let a = (rot - sy).cos() / sy.cos();
    let b = -(rot - sy).cos() * sx.tan() / sy.cos() - rot.sin();
    let c = (rot - sy).sin() / sy.cos();
    let d = -(rot - sy).sin() * sx.tan() / sy.cos() + rot.cos();
    let mut m = [d, -b, 0.0, -c, a, 0.0].map(|x| x / scale);
    m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
    m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
    m[2] += cx;
    m[5] += cy;
    m
}

/// torchvision's `F.affine` on a PIL image (no rotation, scale 1) with `(translate, shear,
/// center)`: builds the inverse matrix and samples with `interpolation` and a black fill.
pub(crate) fn affine(
    img: &Image,
    (translate, shear, center): ((f64, f64), (f64, f64), (f64, f64)),
    interpolation: Interpolation,
) -> Image {
    let m = inverse_affine_matrix(center, 0.0, translate, 1.0, shear);
    sample(img, &m, interpolation)
}

/// PIL's affine transform with `interpolation`: its NEAREST fast path, or the generic one.
fn sample(img: &Image, m: &[f64; 6], interpolation: Interpolation) -> Image {
    match interpolation {
        Interpolation::Nearest => sample_affine_nearest(img, m),
        other => super::affine_filters::sample_affine(img, m, other),
    }
}

/// PIL's `img.rotate(angle, filter)` (no expand, centre of the image, black fill).
pub(crate) fn rotate(img: &Image, degrees: f64, interpolation: Interpolation) -> Image {
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
pub(crate) fn sample_affine_nearest_to(img: &Image, m: &[f64; 6], size: (u32, u32)) -> Image {
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
