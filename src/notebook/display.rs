//! evcxr's rich-output protocol: a block on stdout framed by `EVCXR_BEGIN_CONTENT <mime>` and
//! `EVCXR_END_CONTENT` becomes an inline picture or HTML in the Jupyter cell.
use std::io::Write;

use base64::Engine;

/// Kinds of rich content a notebook cell can show.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mime {
    /// A PNG picture (`image/png`), sent base64-encoded.
    Png,
    /// An SVG picture (`image/svg+xml`), sent as text.
    Svg,
    /// An HTML fragment (`text/html`), sent as text.
    Html,
}

impl Mime {
    /// The MIME type string evcxr expects: `image/png`, `image/svg+xml` or `text/html`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mime::Png => "image/png",
            Mime::Svg => "image/svg+xml",
            Mime::Html => "text/html",
        }
    }
}

/// True inside an evcxr kernel (its runtime process sets `EVCXR_IS_RUNTIME`).
pub fn in_notebook() -> bool {
    std::env::var_os("EVCXR_IS_RUNTIME").is_some()
}

/// Writes one rich-output block: binary content (PNG) is base64-encoded, text content
/// (SVG, HTML) is written as is.
pub fn write_content(out: &mut impl Write, mime: Mime, bytes: &[u8]) -> std::io::Result<()> {
    writeln!(out, "EVCXR_BEGIN_CONTENT {}", mime.as_str())?;
    match mime {
        Mime::Png => {
            out.write_all(base64::engine::general_purpose::STANDARD.encode(bytes).as_bytes())?
        }
        Mime::Svg | Mime::Html => out.write_all(bytes)?,
    }
    writeln!(out)?;
    writeln!(out, "EVCXR_END_CONTENT")?;
    out.flush()
}

/// Shows `bytes` inline when running in a notebook and returns whether it did; outside a
/// notebook nothing is printed (callers save a file instead). Errors: writing to stdout
/// failed.
pub fn display_bytes(mime: Mime, bytes: &[u8]) -> std::io::Result<bool> {
    if !in_notebook() {
        return Ok(false);
    }
    let stdout = std::io::stdout();
    let mut lock = stdout.lock();
    write_content(&mut lock, mime, bytes)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn png_block_is_framed_and_base64() {
        let mut out = Vec::new();
        write_content(&mut out, Mime::Png, &[0x89, b'P', b'N', b'G']).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "EVCXR_BEGIN_CONTENT image/png\niVBORw==\nEVCXR_END_CONTENT\n"
        );
    }

    #[test]
    fn svg_block_is_verbatim() {
        let mut out = Vec::new();
        write_content(&mut out, Mime::Svg, b"<svg/>").unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "EVCXR_BEGIN_CONTENT image/svg+xml\n<svg/>\nEVCXR_END_CONTENT\n"
        );
    }
}
