//! PIL's generic affine transform with its BILINEAR and BICUBIC filters
//! (`ImagingGenericTransform` with `affine_transform` and `bilinear_filter32RGB` /
//! `bicubic_filter32RGB` in Pillow's `libImaging/Geometry.c`), which `Image.transform(...,
//! AFFINE, ...)` and `Image.rotate` run for those filters: what torchvision's `F.affine` and
//! `F.rotate` compute on a PIL image with `interpolation=BILINEAR` or `BICUBIC` (the
//! AutoAugment family's geometric operations under the classification reference's
//! `--interpolation`). Every output pixel centre is mapped through the matrix; one that lands
//! outside the picture stays black (the fill); inside, the neighbours' values are interpolated
//! in double precision with PIL's edge rules and truncated to a byte as PIL truncates.
use super::Interpolation;
use crate::transforms::image::Image;

/// PIL's FLOOR for the coordinates it feeds its filters.
fn floor(v: f64) -> i64 {
    if v < 0.0 {
        v.floor() as i64
    } else {
        v as i64
    }
}

/// The picture `img` through the affine map `m` (output pixel centre -> input coordinates), of
/// the same size, with `interpolation`'s filter: `Bicubic`, else `Bilinear` (NEAREST takes
/// PIL's fast path, [`sample_affine_nearest_to`](super::sample_affine_nearest_to), and is not passed here).
pub(crate) fn sample_affine(img: &Image, m: &[f64; 6], interpolation: Interpolation) -> Image {
    let src = Source { img, w: img.width() as i64, h: img.height() as i64 };
    let (w, h, c) = (src.w, src.h, img.channels() as usize);
    let mut out = Image::zeros(img.width(), img.height(), img.channels());
    let dst = out.data_mut();
    for y in 0..h {
        for x in 0..w {
            let (xin, yin) = (x as f64 + 0.5, y as f64 + 0.5);
            let xx = m[0] * xin + m[1] * yin + m[2];
            let yy = m[3] * xin + m[4] * yin + m[5];
            if xx < 0.0 || xx >= w as f64 || yy < 0.0 || yy >= h as f64 {
                continue;
            }
            let (xx, yy) = (xx - 0.5, yy - 0.5);
            let (px, py) = (floor(xx), floor(yy));
            let at = Point { x: px, y: py, dx: xx - px as f64, dy: yy - py as f64 };
            let d = ((y * w + x) as usize) * c;
            for b in 0..c {
                dst[d + b] = match interpolation {
                    Interpolation::Bicubic => src.bicubic(at, b),
                    _ => src.bilinear(at, b),
                };
            }
        }
    }
    out
}

/// The input picture as PIL's filters read it.
struct Source<'a> {
    img: &'a Image,
    w: i64,
    h: i64,
}

/// Where a filter samples: the floored coordinates and the fractions past them.
#[derive(Clone, Copy)]
struct Point {
    x: i64,
    y: i64,
    dx: f64,
    dy: f64,
}

impl Source<'_> {
    /// Band `b` of pixel (x, y) (inside the picture).
    fn at(&self, x: i64, y: i64, b: usize) -> i32 {
        let c = self.img.channels() as usize;
        self.img.data()[((y * self.w + x) as usize) * c + b] as i32
    }
    fn xclip(&self, x: i64) -> i64 {
        x.clamp(0, self.w - 1)
    }
    fn yclip(&self, y: i64) -> i64 {
        y.clamp(0, self.h - 1)
    }
    fn inside(&self, y: i64) -> bool {
        y >= 0 && y < self.h
    }

    /// `BILINEAR_BODY` for band `b`: the clipped row `y`, then row `y + 1` when inside (else
    /// the first row's value), truncated to a byte.
    fn bilinear(&self, p: Point, b: usize) -> u8 {
        let (x0, x1) = (self.xclip(p.x), self.xclip(p.x + 1));
        let row = |yy: i64| {
            let (a, c) = (self.at(x0, yy, b), self.at(x1, yy, b));
            a as f64 + (c - a) as f64 * p.dx
        };
        let v1 = row(self.yclip(p.y));
        let v2 = if self.inside(p.y + 1) { row(p.y + 1) } else { v1 };
        (v1 + (v2 - v1) * p.dy) as u8
    }

    /// `BICUBIC_BODY` for band `b`: four columns from `x - 1`, the clipped row `y - 1`, then
    /// rows `y`, `y + 1`, `y + 2` when inside (else the previous row's value), clamped to
    /// [0, 255] and truncated.
    fn bicubic(&self, p: Point, b: usize) -> u8 {
        let (x, y) = (p.x - 1, p.y - 1);
        let cols = [self.xclip(x), self.xclip(x + 1), self.xclip(x + 2), self.xclip(x + 3)];
        let row = |yy: i64| cubic_int(cols.map(|cx| self.at(cx, yy, b)), p.dx);
        let v1 = row(self.yclip(y));
        let v2 = if self.inside(y + 1) { row(y + 1) } else { v1 };
        let v3 = if self.inside(y + 2) { row(y + 2) } else { v2 };
        let v4 = if self.inside(y + 3) { row(y + 3) } else { v3 };
        let v = cubic([v1, v2, v3, v4], p.dy);
        if v <= 0.0 {
            0
        } else if v >= 255.0 {
            255
        } else {
            v as u8
        }
    }
}

/// PIL's `BICUBIC` of four values at `d`: the integer differences first (the values are
/// bytes), then Horner's rule in double precision.
fn cubic_int(v: [i32; 4], d: f64) -> f64 {
    let p1 = v[1] as f64;
    let p2 = (-v[0] + v[2]) as f64;
    let p3 = (2 * (v[0] - v[1]) + v[2] - v[3]) as f64;
    let p4 = (-v[0] + v[1] - v[2] + v[3]) as f64;
    p1 + d * (p2 + d * (p3 + d * p4))
}

/// The same on the rows' doubles.
fn cubic(v: [f64; 4], d: f64) -> f64 {
    let p1 = v[1];
    let p2 = -v[0] + v[2];
    let p3 = 2.0 * (v[0] - v[1]) + v[2] - v[3];
    let p4 = -v[0] + v[1] - v[2] + v[3];
    p1 + d * (p2 + d * (p3 + d * p4))
}
