//! evcxr's rich-output protocol, on the crate's ground floor (progress bars and figures both ask
//! [`in_notebook`]; `trainbook::notebook` re-exports this file's public items): a block on stdout framed by `EVCXR_BEGIN_CONTENT <mime>` and
//! `EVCXR_END_CONTENT` becomes an inline picture or HTML in the Jupyter cell. evcxr's REPL
//! (`evcxr`, scripts/kernel/trainbook-repl) shows no pictures: there the content is saved to a file
//! and its path printed.
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

/// True in evcxr's REPL: its runtime process is the REPL's program itself, `evcxr` (the
/// kernel's is `evcxr_jupyter`), or `TRAINBOOK_REPL=1` (set by scripts/kernel/trainbook-repl).
fn in_repl() -> bool {
    in_notebook()
        && (std::env::var_os("TRAINBOOK_REPL").is_some_and(|v| v == "1")
            || std::env::current_exe().is_ok_and(|exe| exe.file_name() == Some("evcxr".as_ref())))
}

/// In the REPL: writes `bytes` to the first free `figure-N.<ext>` in `$TRAINBOOK_FIGURES`
/// (default `figures/`, relative to the working directory) and prints the file's path.
fn save_for_repl(mime: Mime, bytes: &[u8]) -> std::io::Result<()> {
    let dir = std::env::var_os("TRAINBOOK_FIGURES").unwrap_or_else(|| "figures".into());
    let dir = std::path::absolute(dir)?;
    let ext = match mime {
        Mime::Png => "png",
        Mime::Svg => "svg",
        Mime::Html => "html",
    };
    let named = |e: std::io::Error, p: &std::path::Path| {
        std::io::Error::new(e.kind(), format!("{}: {e}", p.display()))
    };
    std::fs::create_dir_all(&dir).map_err(|e| named(e, &dir))?;
    for n in 1.. {
        let path = dir.join(format!("figure-{n}.{ext}"));
        match std::fs::File::options().write(true).create_new(true).open(&path) {
            Ok(mut file) => {
                file.write_all(bytes).map_err(|e| named(e, &path))?;
                println!("figure saved to {}", path.display());
                return Ok(());
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(named(e, &path)),
        }
    }
    unreachable!("figure numbers ran out")
}

/// Shows `bytes` inline when running in a notebook and returns whether it did; in evcxr's REPL
/// it saves them as `figure-N.png` (`.svg`, `.html`) in `$TRAINBOOK_FIGURES` (default
/// `figures/`), prints the file's path and returns true; outside evcxr nothing is printed
/// (callers save a file instead). Errors: writing to stdout or the file failed.
pub fn display_bytes(mime: Mime, bytes: &[u8]) -> std::io::Result<bool> {
    if !in_notebook() {
        return Ok(false);
    }
    if in_repl() {
        save_for_repl(mime, bytes)?;
        return Ok(true);
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
