//! `Image`: an 8-bit picture as PIL holds it in torchvision pipelines, mode "L" (1 channel)
//! or "RGB" (3 channels), stored row-major with interleaved channels.
use crate::{Error, Result};

/// An 8-bit image with 1 (PIL mode "L") or 3 ("RGB") interleaved channels, row-major, top row
/// first: what image transforms take before `ToTensor`. Its size always matches its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    width: u32,
    height: u32,
    channels: u8,
    data: Vec<u8>,
}

impl Image {
    /// Wraps `data` (`height * width * channels` bytes, rows top to bottom). Errors:
    /// [`Error::InvalidArgument`] when `channels` is not 1 or 3 or the length does not match.
    pub fn from_raw(width: u32, height: u32, channels: u8, data: Vec<u8>) -> Result<Image> {
        if channels != 1 && channels != 3 {
            return Err(Error::InvalidArgument(format!(
                "Image: {channels} channels (1 or 3 expected)"
            )));
        }
        if data.len() != width as usize * height as usize * channels as usize {
            return Err(Error::InvalidArgument(format!(
                "Image: {} bytes for {width}x{height}x{channels}",
                data.len()
            )));
        }
        Ok(Image { width, height, channels, data })
    }

    /// A black image of `width` x `height`; `channels` must be 1 or 3 (not checked here).
    pub fn zeros(width: u32, height: u32, channels: u8) -> Image {
        Image {
            width,
            height,
            channels,
            data: vec![0; width as usize * height as usize * channels as usize],
        }
    }

    /// Takes over an `image` crate RGB buffer (no copy).
    pub fn from_rgb(img: image::RgbImage) -> Image {
        let (width, height) = img.dimensions();
        Image { width, height, channels: 3, data: img.into_raw() }
    }

    /// Takes over an `image` crate grey buffer (no copy), as a 1-channel image.
    pub fn from_gray(img: image::GrayImage) -> Image {
        let (width, height) = img.dimensions();
        Image { width, height, channels: 1, data: img.into_raw() }
    }

    /// Back to an `image` crate buffer (RGB; a grey image is replicated to 3 channels).
    pub fn to_rgb(&self) -> image::RgbImage {
        let data = if self.channels == 3 {
            self.data.clone()
        } else {
            self.data.iter().flat_map(|&v| [v, v, v]).collect()
        };
        image::RgbImage::from_raw(self.width, self.height, data)
            .expect("size checked at construction")
    }

    /// Width in pixels (PIL's `img.width`).
    pub fn width(&self) -> u32 {
        self.width
    }
    /// Height in pixels (PIL's `img.height`).
    pub fn height(&self) -> u32 {
        self.height
    }
    /// 1 (grey) or 3 (RGB).
    pub fn channels(&self) -> u8 {
        self.channels
    }
    /// The pixel bytes: `height * width * channels`, row-major, channels interleaved.
    pub fn data(&self) -> &[u8] {
        &self.data
    }
    /// The pixel bytes, to edit in place (the size cannot change).
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }
    /// The pixel bytes, taken out of the image.
    pub fn into_raw(self) -> Vec<u8> {
        self.data
    }

    fn row_len(&self) -> usize {
        self.width as usize * self.channels as usize
    }

    /// PIL's `img.crop((left, top, left + width, top + height))`: areas outside the image are
    /// black, like PIL.
    pub fn crop(&self, left: i64, top: i64, width: u32, height: u32) -> Image {
        let c = self.channels as usize;
        let mut out = Image::zeros(width, height, self.channels);
        let out_row = out.row_len();
        let x0 = left.max(0);
        let x1 = (left + width as i64).min(self.width as i64);
        if x1 <= x0 {
            return out;
        }
        for y in 0..height as i64 {
            let sy = top + y;
            if sy < 0 || sy >= self.height as i64 {
                continue;
            }
            let src = sy as usize * self.row_len() + x0 as usize * c;
            let dst = y as usize * out_row + (x0 - left) as usize * c;
            let n = (x1 - x0) as usize * c;
            out.data[dst..dst + n].copy_from_slice(&self.data[src..src + n]);
        }
        out
    }

    /// Mirror left-right (PIL `FLIP_LEFT_RIGHT`).
    pub fn flip_horizontal(&self) -> Image {
        let c = self.channels as usize;
        let mut out = self.clone();
        for (src_row, dst_row) in
            self.data.chunks_exact(self.row_len()).zip(out.data.chunks_exact_mut(self.row_len()))
        {
            for (x, px) in src_row.chunks_exact(c).enumerate() {
                let d = (self.width as usize - 1 - x) * c;
                dst_row[d..d + c].copy_from_slice(px);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crop_pads_with_black_outside() {
        let img = Image::from_raw(2, 2, 1, vec![1, 2, 3, 4]).unwrap();
        let c = img.crop(-1, 0, 3, 3);
        assert_eq!(c.data(), &[0, 1, 2, 0, 3, 4, 0, 0, 0]);
        assert_eq!(img.flip_horizontal().data(), &[2, 1, 4, 3]);
        assert!(Image::from_raw(2, 2, 3, vec![0; 5]).is_err());
    }
}
