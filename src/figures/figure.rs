//! The plumbing every figure shares: the [`Figure`] (PNG bytes, shown inline in Jupyter with
//! [`Figure::show`] or written to a file with [`Figure::save`]), the white canvas plotters
//! draws on, the font, and text cut to fit. The figures themselves (curves, confusion matrix,
//! image grid) have files of their own.
//!
//! Text is drawn with a TrueType font read at run time: `$TRAINBOOK_FONT` if set, else DejaVu
//! Sans (Debian/Ubuntu package `fonts-dejavu-core`, installed system-wide, or unpacked by the
//! set-up into the venv's `debs/` where there is no root: `$TRAINBOOK_VENV/debs/...` or
//! `$VIRTUAL_ENV/debs/...`).
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::display::{display_bytes, Mime};
use crate::{Error, Result, WithPath};

/// Where Linux distributions install DejaVu Sans.
const SYSTEM_FONTS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
];

/// The font files to try, in order: the system's, then fonts-dejavu-core unpacked without
/// root by scripts/setup/setup.sh (fetch-debs.sh or fetch_debs.py) into the venv named by
/// `$TRAINBOOK_VENV` (set by the project's `.cargo/config.toml` and its kernel) or
/// `$VIRTUAL_ENV`.
fn font_paths() -> Vec<PathBuf> {
    let venvs = ["TRAINBOOK_VENV", "VIRTUAL_ENV"]
        .into_iter()
        .filter_map(|name| std::env::var_os(name).filter(|v| !v.is_empty()))
        .map(|venv| Path::new(&venv).join("debs/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"));
    SYSTEM_FONTS.iter().map(PathBuf::from).chain(venvs).collect()
}

/// A rendered picture, kept as PNG bytes. As the last expression of a notebook cell it is shown
/// inline (evcxr calls [`evcxr_display`](Self::evcxr_display)); elsewhere [`save`](Self::save)
/// it.
#[derive(Clone, Debug)]
pub struct Figure {
    png: Vec<u8>,
    width: u32,
    height: u32,
}

impl Figure {
    /// The PNG file's bytes.
    pub fn png(&self) -> &[u8] {
        &self.png
    }
    /// Width in pixels.
    pub fn width(&self) -> u32 {
        self.width
    }
    /// Height in pixels.
    pub fn height(&self) -> u32 {
        self.height
    }
    /// Writes the PNG to `path`, creating its parent directories. Errors: [`Error::Io`]
    /// naming the path.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_path(dir)?;
        }
        std::fs::write(path, &self.png).with_path(path)
    }
    /// Shows the figure inline when running in a notebook; returns whether it did.
    pub fn show(&self) -> Result<bool> {
        display_bytes(Mime::Png, &self.png).with_path("<stdout>")
    }
    /// Called by evcxr when a figure is a cell's last expression: shows it inline.
    pub fn evcxr_display(&self) {
        if let Err(e) = self.show() {
            eprintln!("{e}");
        }
    }
}

/// A plotters failure as an [`Error::Plot`].
pub(super) fn plot_err<E: std::fmt::Display>(e: E) -> Error {
    Error::Plot(e.to_string())
}

/// Registers the font once per process (`sans-serif`, `serif` and `monospace` all use it).
/// Failures are not remembered, so installing the font or setting `TRAINBOOK_FONT` and retrying
/// works.
pub(super) fn ensure_font() -> Result<()> {
    static REGISTERED: Mutex<bool> = Mutex::new(false);
    let mut done =
        REGISTERED.lock().map_err(|_| Error::Plot("font registry lock poisoned".into()))?;
    if *done {
        return Ok(());
    }
    let (path, bytes) = match std::env::var_os("TRAINBOOK_FONT") {
        Some(p) => {
            let bytes = std::fs::read(&p).map_err(|e| {
                Error::Plot(format!("TRAINBOOK_FONT={}: {e}", Path::new(&p).display()))
            })?;
            (Path::new(&p).to_path_buf(), bytes)
        }
        None => {
            let candidates = font_paths();
            candidates
                .iter()
                .find_map(|p| std::fs::read(p).ok().map(|b| (p.clone(), b)))
                .ok_or_else(|| {
                    let looked: Vec<String> =
                        candidates.iter().map(|p| p.display().to_string()).collect();
                    Error::Plot(format!(
                        "no font to draw text with: install the package fonts-dejavu-core \
                         (apt-get install fonts-dejavu-core) or set TRAINBOOK_FONT to a .ttf file \
                         (looked in {})",
                        looked.join(", ")
                    ))
                })?
        }
    };
    // plotters keeps `&'static` font data: leak the bytes, once per process.
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    for family in ["sans-serif", "serif", "monospace"] {
        plotters::style::register_font(family, FontStyle::Normal, bytes).map_err(|_| {
            Error::Plot(format!("{}: not a usable TrueType/OpenType font", path.display()))
        })?;
    }
    *done = true;
    Ok(())
}

/// Renders `draw` on a white `width` x `height` canvas; `post` may then edit the raw pixels.
pub(super) fn render(
    width: u32,
    height: u32,
    draw: impl FnOnce(&DrawingArea<BitMapBackend<'_>, Shift>) -> Result<()>,
    post: impl FnOnce(&mut image::RgbImage),
) -> Result<Figure> {
    ensure_font()?;
    let mut buf = vec![255u8; width as usize * height as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut buf, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        draw(&root)?;
        root.present().map_err(plot_err)?;
    }
    let mut img = image::RgbImage::from_raw(width, height, buf)
        .ok_or_else(|| Error::Plot("bad pixel buffer".into()))?;
    post(&mut img);
    let mut png = Cursor::new(Vec::new());
    img.write_to(&mut png, image::ImageFormat::Png).map_err(plot_err)?;
    Ok(Figure { png: png.into_inner(), width, height })
}

/// Cuts `text` (adding "…") until it is at most `max_px` wide in `font`.
pub(super) fn fit_text(text: &str, font: &FontDesc<'_>, max_px: u32) -> String {
    let fits = |s: &String| font.box_size(s).map(|(w, _)| w <= max_px).unwrap_or(true);
    let chars: Vec<char> = text.chars().collect();
    let cut = |k: usize| {
        if k == chars.len() {
            text.to_string()
        } else {
            chars[..k].iter().collect::<String>() + "…"
        }
    };
    (0..=chars.len()).rev().map(cut).find(fits).unwrap_or_default()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Decodes the PNG, checks its size, and returns how many distinct colours it has.
    pub(in crate::figures) fn colors(fig: &Figure) -> usize {
        let img = image::load_from_memory(fig.png()).unwrap().to_rgb8();
        assert_eq!((img.width(), img.height()), (fig.width(), fig.height()));
        img.pixels().map(|p| p.0).collect::<std::collections::HashSet<_>>().len()
    }

    /// Saves `fig` under `$TRAINBOOK_TEST_PLOTS` when set, to look at the figures.
    pub(in crate::figures) fn keep(fig: &Figure, name: &str) {
        if let Some(dir) = std::env::var_os("TRAINBOOK_TEST_PLOTS") {
            fig.save(Path::new(&dir).join(name)).unwrap();
        }
    }
}
