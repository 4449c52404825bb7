//! JPEG decoding with libjpeg-turbo, the library inside Pillow, with Pillow's settings: the
//! accurate integer IDCT (`JDCT_ISLOW`) and fancy (triangle-filter) chroma upsampling, colour
//! space as libjpeg guesses it from the JFIF/Adobe markers. The pixels are therefore those of
//! `PIL.Image.open(f).convert("RGB")`, which torchvision's `ImageFolder` loads: bit for bit on
//! baseline and progressive files, any chroma subsampling, grey and CMYK/YCCK alike (tested
//! against Pillow in `tests/parity/jpeg_parity.rs`). All of it is integer arithmetic, and
//! libjpeg-turbo's SIMD kernels are bit-exact with its C code, so the equality holds on every CPU.
//!
//! Pillow's conventions kept here: CMYK files are read with Adobe's (inverted) polarity and
//! converted to RGB with Pillow's `cmyk2rgb`; libjpeg's warnings (extraneous bytes, a corrupt
//! segment) do not fail a file, but a file that ends before its image data does is an error
//! ("image file is truncated" in Pillow).
use std::cell::RefCell;
use std::ffi::CStr;

use turbojpeg_sys as tj;

use crate::transforms::Image;

/// PIL's decompression-bomb limit: twice `Image.MAX_IMAGE_PIXELS` (89,478,485); larger images
/// are refused before any memory is set aside for them.
const MAX_PIXELS: usize = 2 * 89_478_485;

/// The first bytes of every JPEG file (SOI marker and the next marker's 0xFF).
pub(crate) fn is_jpeg(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0xFF, 0xD8, 0xFF])
}

/// A libjpeg-turbo decompressor handle, freed on drop.
struct Decompressor(tj::tjhandle);

impl Decompressor {
    fn new() -> Result<Self, String> {
        // SAFETY: tj3Init has no preconditions; a null handle means failure.
        let handle = unsafe { tj::tj3Init(tj::TJINIT_TJINIT_DECOMPRESS as i32) };
        if handle.is_null() {
            return Err("libjpeg-turbo could not create a decompressor".into());
        }
        Ok(Decompressor(handle))
    }

    fn get(&self, param: tj::TJPARAM) -> i32 {
        // SAFETY: the handle is valid for self's lifetime.
        unsafe { tj::tj3Get(self.0, param as i32) }
    }

    /// libjpeg-turbo's last message and whether it was only a warning.
    fn last_message(&self) -> (String, bool) {
        // SAFETY: the handle is valid; the string is owned by the handle and copied here.
        let text = unsafe { CStr::from_ptr(tj::tj3GetErrorStr(self.0)) };
        let warning = unsafe { tj::tj3GetErrorCode(self.0) } == tj::TJERR_TJERR_WARNING as i32;
        (text.to_string_lossy().into_owned(), warning)
    }

    /// Decodes `bytes` into 8-bit pixels of `format` (`channels` bytes each).
    fn decode(
        &mut self,
        bytes: &[u8],
        format: tj::TJPF,
        channels: usize,
    ) -> Result<Vec<u8>, String> {
        let (width, height) = self.size();
        let mut pixels = vec![0u8; width * height * channels];
        // SAFETY: the handle is valid, `bytes` is readable for its length and `pixels` holds
        // height rows of width * channels bytes (the pitch passed).
        let status = unsafe {
            tj::tj3Decompress8(
                self.0,
                bytes.as_ptr(),
                bytes.len() as tj::size_t,
                pixels.as_mut_ptr(),
                (width * channels) as i32,
                format,
            )
        };
        if status != 0 {
            let (message, warning) = self.last_message();
            // Warnings leave a complete image (Pillow ignores them) unless the data ran out.
            if !warning || ends_early(bytes) {
                return Err(if warning { truncated(&message) } else { message });
            }
        }
        Ok(pixels)
    }

    fn size(&self) -> (usize, usize) {
        let width = self.get(tj::TJPARAM_TJPARAM_JPEGWIDTH).max(0) as usize;
        let height = self.get(tj::TJPARAM_TJPARAM_JPEGHEIGHT).max(0) as usize;
        (width, height)
    }
}

impl Drop for Decompressor {
    fn drop(&mut self) {
        // SAFETY: the handle came from tj3Init and is destroyed once.
        unsafe { tj::tj3Destroy(self.0) }
    }
}

thread_local! {
    /// One decompressor per loader thread, reused from image to image.
    static DECOMPRESSOR: RefCell<Option<Decompressor>> = const { RefCell::new(None) };
}

/// Decodes a JPEG file's bytes into RGB as `PIL.Image.open(f).convert("RGB")` does.
pub(crate) fn decode_jpeg(bytes: &[u8]) -> Result<Image, String> {
    DECOMPRESSOR.with(|cell| {
        let mut cell = cell.borrow_mut();
        if cell.is_none() {
            *cell = Some(Decompressor::new()?);
        }
        let decoder = cell.as_mut().expect("set above");
        decode_with(decoder, bytes)
    })
}

fn decode_with(decoder: &mut Decompressor, bytes: &[u8]) -> Result<Image, String> {
    // SAFETY: the handle is valid and `bytes` is readable for its length.
    let status =
        unsafe { tj::tj3DecompressHeader(decoder.0, bytes.as_ptr(), bytes.len() as tj::size_t) };
    if status != 0 {
        let (message, warning) = decoder.last_message();
        if !warning {
            return Err(if ends_early(bytes) { truncated(&message) } else { message });
        }
    }
    let (width, height) = decoder.size();
    if width == 0 || height == 0 {
        return Err("JPEG header without an image size".into());
    }
    if width * height > MAX_PIXELS {
        return Err(format!(
            "a {width}x{height} image exceeds {MAX_PIXELS} pixels, the limit beyond which PIL \
             refuses to open a file (DecompressionBombError)"
        ));
    }
    let colorspace = decoder.get(tj::TJPARAM_TJPARAM_COLORSPACE);
    let cmyk = colorspace == tj::TJCS_TJCS_CMYK as i32 || colorspace == tj::TJCS_TJCS_YCCK as i32;
    let rgb = if cmyk {
        cmyk_to_rgb(&decoder.decode(bytes, tj::TJPF_TJPF_CMYK, 4)?)
    } else {
        decoder.decode(bytes, tj::TJPF_TJPF_RGB, 3)?
    };
    Image::from_raw(width as u32, height as u32, 3, rgb).map_err(|e| e.to_string())
}

fn truncated(message: &str) -> String {
    format!("image file is truncated: the JPEG data ends before the image does ({message})")
}

/// Pillow's `CMYK;I` unpacking (Adobe's inverted polarity) followed by its `cmyk2rgb`:
/// `r = nk - nk * c / 255` with `nk = 255 - k`, rounded as Pillow's `MULDIV255`.
fn cmyk_to_rgb(stored: &[u8]) -> Vec<u8> {
    let muldiv255 = |a: u32, b: u32| {
        let t = a * b + 128;
        ((t >> 8) + t) >> 8
    };
    let mut rgb = Vec::with_capacity(stored.len() / 4 * 3);
    for px in stored.chunks_exact(4) {
        // Stored values are inverted: Pillow's c = 255 - stored c, and nk = 255 - k = stored k.
        let nk = px[3] as u32;
        for &stored_ink in &px[..3] {
            let ink = 255 - stored_ink as u32;
            rgb.push(nk.saturating_sub(muldiv255(ink, nk)) as u8);
        }
    }
    rgb
}

/// Whether the JPEG stream stops before its end-of-image marker: the markers are walked from
/// the start (segments by their lengths, entropy-coded data up to the next marker), and the data
/// running out first means the file was cut short.
fn ends_early(bytes: &[u8]) -> bool {
    let mut i = 2; // after SOI
    loop {
        // A marker: one or more 0xFF, then its code.
        while bytes.get(i) == Some(&0xFF) && bytes.get(i + 1) == Some(&0xFF) {
            i += 1;
        }
        let (Some(&0xFF), Some(&code)) = (bytes.get(i), bytes.get(i + 1)) else {
            return true;
        };
        i += 2;
        match code {
            0xD9 => return false,           // EOI
            0x01 | 0xD0..=0xD7 => continue, // TEM, RSTn: no length
            _ => {}
        }
        let Some(len) = bytes.get(i..i + 2).map(|l| u16::from_be_bytes([l[0], l[1]]) as usize)
        else {
            return true;
        };
        i += len;
        if i > bytes.len() {
            return true;
        }
        if code == 0xDA {
            // Entropy-coded data: 0xFF is followed by 0x00 (a stuffed byte) or RSTn inside it.
            loop {
                match bytes[i..].iter().position(|&b| b == 0xFF) {
                    None => return true,
                    Some(at) => i += at,
                }
                match bytes.get(i + 1) {
                    None => return true,
                    Some(0x00 | 0xD0..=0xD7 | 0xFF) => i += 1,
                    Some(_) => break,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A minimal stream: SOI, an APP0 of 4 bytes, SOS with 2 bytes of header, data, EOI.
    const WHOLE: &[u8] = &[
        0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0xAA, 0xBB, 0xFF, 0xDA, 0x00, 0x02, 0x12, 0xFF, 0x00,
        0x34, 0xFF, 0xD3, 0x56, 0xFF, 0xD9,
    ];

    #[test]
    fn a_stream_with_its_end_marker_is_whole() {
        assert!(!ends_early(WHOLE));
        let mut trailing = WHOLE.to_vec();
        trailing.extend_from_slice(b"trailing bytes after EOI");
        assert!(!ends_early(&trailing));
    }

    #[test]
    fn every_cut_of_a_stream_ends_early() {
        for cut in 2..WHOLE.len() {
            assert!(ends_early(&WHOLE[..cut]), "cut at {cut}");
        }
    }

    #[test]
    fn cmyk_follows_pillows_rounding() {
        // stored (inverted) values: white paper, full black, and a mid tone.
        let rgb = cmyk_to_rgb(&[255, 255, 255, 255, 0, 0, 0, 0, 128, 200, 55, 180]);
        // Mid tone: nk = 180; c = 127 -> 180 - 90 = 90; m = 55 -> 180 - 39 = 141; y = 200 -> 180 - 141 = 39.
        assert_eq!(rgb, vec![255, 255, 255, 0, 0, 0, 90, 141, 39]);
    }

    #[test]
    fn huge_images_are_refused_as_pil_does() {
        let img = image::RgbImage::from_pixel(8, 8, image::Rgb([200, 30, 90]));
        let mut bytes = Vec::new();
        image::codecs::jpeg::JpegEncoder::new(&mut bytes).encode_image(&img).unwrap();
        assert_eq!(decode_jpeg(&bytes).unwrap().width(), 8);
        // SOF0's height and width (after FF C0, the length and the precision) set to 60000.
        let sof = bytes.windows(2).position(|w| w == [0xFF, 0xC0]).unwrap();
        bytes[sof + 5..sof + 9].copy_from_slice(&[0xEA, 0x60, 0xEA, 0x60]);
        let err = decode_jpeg(&bytes).unwrap_err();
        assert!(err.contains("60000x60000") && err.contains("DecompressionBombError"), "{err}");
    }

    #[test]
    fn garbage_is_an_error_naming_the_problem() {
        let err = decode_jpeg(&[0xFF, 0xD8, 0xFF, 0x00, 0x01, 0x02]).unwrap_err();
        assert!(err.contains("without an image size"), "{err}");
    }
}
