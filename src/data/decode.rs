//! Reading image files into RGB like PIL's `Image.open(f).convert("RGB")`: JPEG, PNG, BMP,
//! WebP, GIF and TIFF through the `image` crate; grey, grey+alpha, RGBA, palette and 16-bit
//! images become 8-bit RGB (alpha is dropped, as PIL does without compositing).
use std::path::Path;

use crate::transforms::Image;
use crate::{Error, Result, WithPath};

/// Decodes the file at `path` into an RGB [`Image`]; errors name the file.
pub fn load_rgb(path: &Path) -> Result<Image> {
    let bytes = std::fs::read(path).with_path(path)?;
    decode_rgb(&bytes).map_err(|message| Error::Decode { path: path.to_path_buf(), message })
}

/// Decodes image bytes (format sniffed from the content) into RGB.
pub fn decode_rgb(bytes: &[u8]) -> std::result::Result<Image, String> {
    let reader = image::ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| e.to_string())?;
    if reader.format().is_none() {
        return Err("unrecognised image format".into());
    }
    let decoded = reader.decode().map_err(|e| e.to_string())?;
    Ok(Image::from_rgb(decoded.to_rgb8()))
}
