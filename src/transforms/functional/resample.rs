//! PIL's convolution resampling (`Image.resize` with a filter, `libImaging/Resample.c`) for
//! 8-bit images, computed as PIL computes it: each output pixel's filter weights in double
//! precision, divided by their sum, rounded to 22-bit fixed point; a pass per axis (in Pillow
//! 13's order), each adding the weighted pixels in 32-bit integers from a half and clipping to
//! 0..=255. Here for bicubic (PIL's `a = -0.5` cubic, support 2), where the resizing crate's
//! Catmull-Rom kernel differed from PIL's by up to 10 levels; `tests/parity/transforms_parity.rs`
//! compares it with torchvision's PIL resize byte for byte.
use crate::transforms::image::Image;
use crate::Result;

/// PIL's `PRECISION_BITS`: 32 bits less 8 for the pixel and 2 for the filters' overshoot.
const PRECISION_BITS: u32 = 22;

/// PIL's bicubic filter (`a = -0.5`).
fn bicubic(x: f64) -> f64 {
    const A: f64 = -0.5;
    let x = x.abs();
    if x < 1.0 {
        ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        (((x - 5.0) * x + 8.0) * x - 4.0) * A
    } else {
        0.0
    }
}

/// A filter and its support (PIL's `struct filter`).
#[derive(Clone, Copy)]
pub(crate) struct Filter {
    weight: fn(f64) -> f64,
    support: f64,
}

/// PIL's `BICUBIC`.
pub(crate) const BICUBIC: Filter = Filter { weight: bicubic, support: 2.0 };

/// Each output position's first input index, its number of inputs, and their fixed-point
/// weights (`ksize` per position).
struct Coefficients {
    ksize: usize,
    bounds: Vec<(usize, usize)>,
    weights: Vec<i32>,
}

/// PIL's `precompute_coeffs` then `normalize_coeffs_8bpc`, for the whole input (`in0` 0,
/// `in1` the input size).
fn coefficients(in_size: usize, out_size: usize, filter: Filter) -> Coefficients {
    let scale = f64::from(in_size as f32) / out_size as f64;
    let filterscale = scale.max(1.0);
    let support = filter.support * filterscale;
    let ksize = support.ceil() as usize * 2 + 1;
    let mut bounds = Vec::with_capacity(out_size);
    let mut weights = vec![0i32; out_size * ksize];
    let mut k = vec![0f64; ksize];
    for xx in 0..out_size {
        let center = (xx as f64 + 0.5) * scale;
        let ss = 1.0 / filterscale;
        // C's (int) casts truncate towards zero, as `as` does.
        let xmin = ((center - support + 0.5) as i64).max(0);
        let xmax = ((center + support + 0.5) as i64).min(in_size as i64) - xmin;
        let xmax = xmax.max(0) as usize;
        let mut ww = 0.0;
        for (x, kx) in k.iter_mut().enumerate().take(xmax) {
            let w = (filter.weight)(((x as i64 + xmin) as f64 - center + 0.5) * ss);
            *kx = w;
            ww += w;
        }
        let row = &mut weights[xx * ksize..(xx + 1) * ksize];
        for (x, out) in row.iter_mut().enumerate().take(xmax) {
            let w = if ww != 0.0 { k[x] / ww } else { k[x] };
            let scaled = w * f64::from(1u32 << PRECISION_BITS);
            *out = if w < 0.0 { (-0.5 + scaled) as i32 } else { (0.5 + scaled) as i32 };
        }
        bounds.push((xmin as usize, xmax));
    }
    Coefficients { ksize, bounds, weights }
}

/// PIL's `clip8`: the fixed-point sum back to a byte.
fn clip8(sum: i32) -> u8 {
    (sum >> PRECISION_BITS).clamp(0, 255) as u8
}

/// A horizontal pass: `w_in` x `rows` pixels of `c` channels to `w_out` x `rows`.
fn horizontal(
    data: &[u8],
    (w_in, rows, c): (usize, usize, usize),
    w_out: usize,
    f: Filter,
) -> Vec<u8> {
    let co = coefficients(w_in, w_out, f);
    let mut out = vec![0u8; w_out * rows * c];
    for y in 0..rows {
        let row = &data[y * w_in * c..(y + 1) * w_in * c];
        for (xx, &(xmin, n)) in co.bounds.iter().enumerate() {
            let k = &co.weights[xx * co.ksize..xx * co.ksize + n];
            for ch in 0..c {
                let mut sum = 1i32 << (PRECISION_BITS - 1);
                for (x, &kx) in k.iter().enumerate() {
                    sum += i32::from(row[(xmin + x) * c + ch]) * kx;
                }
                out[(y * w_out + xx) * c + ch] = clip8(sum);
            }
        }
    }
    out
}

/// A vertical pass: `width` x `h_in` pixels of `c` channels to `width` x `h_out`.
fn vertical(
    data: &[u8],
    (width, h_in, c): (usize, usize, usize),
    h_out: usize,
    f: Filter,
) -> Vec<u8> {
    let co = coefficients(h_in, h_out, f);
    let stride = width * c;
    let mut out = vec![0u8; stride * h_out];
    for (yy, &(ymin, n)) in co.bounds.iter().enumerate() {
        let k = &co.weights[yy * co.ksize..yy * co.ksize + n];
        for i in 0..stride {
            let mut sum = 1i32 << (PRECISION_BITS - 1);
            for (y, &ky) in k.iter().enumerate() {
                sum += i32::from(data[(ymin + y) * stride + i]) * ky;
            }
            out[yy * stride + i] = clip8(sum);
        }
    }
    out
}

/// `img` (1 or 3 channels, interleaved) resized to `width` x `height` with `filter`, PIL's bytes:
/// a pass per axis that changes, the horizontal one first unless the height shrinks by more
/// than twice as many pixels as the width (Pillow 13's order; each pass rounds to bytes, so
/// the order shows in the result).
pub(crate) fn resample(img: &Image, width: u32, height: u32, filter: Filter) -> Result<Image> {
    let c = img.channels() as usize;
    let (w_in, h_in) = (img.width() as usize, img.height() as usize);
    let (w_out, h_out) = (width as usize, height as usize);
    let (need_h, need_v) = (w_out != w_in, h_out != h_in);
    let shrink_h = h_in as i64 - h_out as i64;
    let vertical_first = shrink_h > 0 && shrink_h > (w_in as i64 - w_out as i64) * 2;
    let mut data = img.data().to_vec();
    if vertical_first {
        if need_v {
            data = vertical(&data, (w_in, h_in, c), h_out, filter);
        }
        if need_h {
            data = horizontal(&data, (w_in, h_out, c), w_out, filter);
        }
    } else {
        if need_h {
            data = horizontal(&data, (w_in, h_in, c), w_out, filter);
        }
        if need_v {
            data = vertical(&data, (w_out, h_in, c), h_out, filter);
        }
    }
    Image::from_raw(width, height, img.channels(), data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_constant_image_stays_constant_and_weights_sum_to_one() {
        let img = Image::from_raw(9, 7, 3, vec![200; 9 * 7 * 3]).unwrap();
        for (w, h) in [(4, 3), (20, 15), (9, 2)] {
            let out = resample(&img, w, h, BICUBIC).unwrap();
            assert!(out.data().iter().all(|&v| v == 200), "{w}x{h}");
        }
        let co = coefficients(10, 4, BICUBIC);
        for (xx, &(_, n)) in co.bounds.iter().enumerate() {
            let sum: i64 =
                co.weights[xx * co.ksize..xx * co.ksize + n].iter().map(|&k| i64::from(k)).sum();
            assert!((sum - (1 << PRECISION_BITS)).abs() <= n as i64, "position {xx}: {sum}");
        }
    }
}
