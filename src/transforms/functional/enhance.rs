//! PIL's colour and histogram kernels on an [`Image`], as torchvision's PIL path calls them:
//! ImageEnhance's degenerate images and blend (brightness, colour, contrast, sharpness), and
//! ImageOps' look-up tables (posterize, solarize, autocontrast, equalize, invert).
use crate::transforms::image::Image;

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
pub(crate) fn mean_grey(img: &Image) -> Image {
    let grey = grey_levels(img);
    let mean = (grey.iter().map(|&v| v as f64).sum::<f64>() / grey.len().max(1) as f64 + 0.5) as u8;
    Image::from_raw(img.width(), img.height(), img.channels(), vec![mean; img.data().len()])
        .expect("same size")
}

/// The grey version in the image's own mode (`convert("L").convert(mode)`).
pub(crate) fn grey_as_mode(img: &Image) -> Image {
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
pub(crate) fn blend(degenerate: &Image, img: &Image, alpha: f32) -> Image {
    let mut data = vec![0u8; img.data().len()];
    for ((o, &a), &b) in data.iter_mut().zip(degenerate.data()).zip(img.data()) {
        let (a, b) = (a as f32, b as f32);
        *o = (a + alpha * (b - a)).clamp(0.0, 255.0) as i32 as u8;
    }
    Image::from_raw(img.width(), img.height(), img.channels(), data).expect("same size")
}

/// PIL's `filter(SMOOTH)`: 3x3 kernel [[1,1,1],[1,5,1],[1,1,1]]/13, borders copied.
pub(crate) fn smooth(img: &Image) -> Image {
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

pub(crate) fn map_lut(img: &Image, lut: &[u8; 256]) -> Image {
    let data = img.data().iter().map(|&v| lut[v as usize]).collect();
    Image::from_raw(img.width(), img.height(), img.channels(), data).expect("same size")
}

pub(crate) fn per_channel_lut(img: &Image, make: fn(&[u64; 256]) -> [u8; 256]) -> Image {
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
pub(crate) fn autocontrast_lut(hist: &[u64; 256]) -> [u8; 256] {
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
pub(crate) fn equalize_lut(hist: &[u64; 256]) -> [u8; 256] {
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
