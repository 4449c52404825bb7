//! Reading image files into RGB like PIL's `Image.open(f).convert("RGB")`: JPEG with
//! libjpeg-turbo as Pillow decodes it (the same pixels; see the `jpeg` module), PNG, BMP, WebP,
//! GIF and TIFF through the `image` crate; grey, grey+alpha, RGBA, palette and 16-bit images
//! become 8-bit RGB (alpha is dropped, as PIL does without compositing). One deliberate
//! difference: 16-bit grey is scaled to 8 bits (round(v / 257)), where PIL clips it to 255.
use std::path::Path;

use crate::transforms::Image;
use crate::{Error, Result, WithPath};

/// Decodes the file at `path` into an RGB [`Image`]; errors name the file.
pub fn load_rgb(path: &Path) -> Result<Image> {
    let bytes = std::fs::read(path).with_path(path)?;
    decode_rgb(&bytes).map_err(|message| Error::Decode { path: path.to_path_buf(), message })
}

/// Decodes image bytes (format sniffed from the content, not the file name) into RGB.
///
/// ```
/// // A 2x1 PNG: one red and one grey pixel.
/// let pixels = image::RgbImage::from_raw(2, 1, vec![255, 0, 0, 64, 64, 64]).unwrap();
/// let mut png = std::io::Cursor::new(Vec::new());
/// pixels.write_to(&mut png, image::ImageFormat::Png).unwrap();
/// let img = trainbook::data::decode_rgb(png.get_ref()).unwrap();
/// assert_eq!((img.width(), img.height()), (2, 1));
/// assert_eq!(img.data(), &[255, 0, 0, 64, 64, 64][..]);
/// assert!(trainbook::data::decode_rgb(b"not an image").is_err());
/// ```
pub fn decode_rgb(bytes: &[u8]) -> std::result::Result<Image, String> {
    if super::jpeg::is_jpeg(bytes) {
        return super::jpeg::decode_jpeg(bytes);
    }
    let reader = image::ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| e.to_string())?;
    if reader.format().is_none() {
        return Err("unrecognised image format".into());
    }
    let decoded = reader.decode().map_err(|e| e.to_string())?;
    Ok(Image::from_rgb(decoded.to_rgb8()))
}
