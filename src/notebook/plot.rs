//! Figures for a student: the canvas, fonts and PNG of every plot, and the loss and accuracy
//! curves (the confusion matrix and the image grid have modules of their own).
//! Each is drawn with plotters into an RGB buffer and kept as PNG bytes, shown inline in
//! Jupyter ([`Figure::show`]) or written to a file ([`Figure::save`]).
//!
//! Text is drawn with a TrueType font read at run time: `$TRAINBOOK_FONT` if set, else DejaVu
//! Sans (Debian/Ubuntu package `fonts-dejavu-core`, installed, or unpacked into `.venv/debs` by
//! the set-up where there is no root).
use std::io::Cursor;
use std::path::Path;
use std::sync::Mutex;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

use super::{display_bytes, Mime};
use crate::train::EpochRecord;
use crate::{Error, Result, WithPath};

const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    // fonts-dejavu-core unpacked without root by scripts/setup.sh (scripts/fetch-debs.sh).
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/.venv/debs/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
    ),
];

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
        None => FONT_PATHS
            .iter()
            .find_map(|p| std::fs::read(p).ok().map(|b| (Path::new(p).to_path_buf(), b)))
            .ok_or_else(|| {
                Error::Plot(format!(
                    "no font to draw text with: install the package fonts-dejavu-core \
                     (apt-get install fonts-dejavu-core) or set TRAINBOOK_FONT to a .ttf file \
                     (looked in {})",
                    FONT_PATHS.join(", ")
                ))
            })?,
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

/// Padded value range of the finite values, for a chart axis.
fn value_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    let pad = if hi > lo { (hi - lo) * 0.08 } else { lo.abs().max(1.0) * 0.1 };
    (lo - pad, hi + pad)
}

/// Loss (left) and accuracy in % (right) per epoch, training against validation (validation
/// points only for the epochs that have them), as a 1000x400 figure. Errors:
/// [`Error::InvalidArgument`] for an empty history; [`Error::Plot`] when no font is found.
pub fn loss_accuracy_curves(history: &[EpochRecord]) -> Result<Figure> {
    if history.is_empty() {
        return Err(Error::InvalidArgument("loss_accuracy_curves: the history is empty".into()));
    }
    let epochs = || history.iter().map(|r| r.epoch as i64);
    let (mut x0, mut x1) = (epochs().min().unwrap_or(0), epochs().max().unwrap_or(0));
    if x0 == x1 {
        (x0, x1) = (x0 - 1, x1 + 1);
    }
    // (epoch, value) points of the finite values; validation only where it was measured.
    let points = |value: &dyn Fn(&EpochRecord) -> Option<f64>, scale: f64| -> Vec<(i64, f64)> {
        let points = history.iter().filter_map(|r| value(r).map(|v| (r.epoch as i64, v * scale)));
        points.filter(|p| p.1.is_finite()).collect()
    };
    let series =
        |train: fn(&EpochRecord) -> f64, val: fn(&EpochRecord) -> Option<f64>, scale: f64| {
            (points(&|r| Some(train(r)), scale), points(&val, scale))
        };
    let loss = series(|r| r.train_loss, |r| r.val_loss, 1.0);
    let acc = series(|r| r.train_acc, |r| r.val_acc, 100.0);
    let title = format!(
        "Training history ({} epoch{})",
        history.len(),
        if history.len() == 1 { "" } else { "s" }
    );
    render(
        1000,
        400,
        |root| {
            let root = root.titled(&title, ("sans-serif", 22)).map_err(plot_err)?;
            let panels = root.split_evenly((1, 2));
            let specs = [("Loss", "loss", &loss, false), ("Accuracy", "accuracy (%)", &acc, true)];
            for (area, (caption, ylabel, (train, val), is_acc)) in panels.iter().zip(specs) {
                let (mut y0, mut y1) = value_range(train.iter().chain(val.iter()).map(|p| p.1));
                if is_acc {
                    (y0, y1) = if y1.min(100.0) > y0.max(0.0) {
                        (y0.max(0.0), y1.min(100.0))
                    } else {
                        (0.0, 100.0)
                    };
                }
                let mut chart = ChartBuilder::on(area)
                    .caption(caption, ("sans-serif", 18))
                    .margin(10)
                    .x_label_area_size(40)
                    .y_label_area_size(60)
                    .build_cartesian_2d(x0..x1, y0..y1)
                    .map_err(plot_err)?;
                chart
                    .configure_mesh()
                    .x_desc("epoch")
                    .y_desc(ylabel)
                    .x_labels(10.min((x1 - x0 + 1) as usize))
                    .y_label_formatter(&|v| {
                        if is_acc {
                            format!("{v:.1}")
                        } else {
                            format!("{v:.3}")
                        }
                    })
                    .draw()
                    .map_err(plot_err)?;
                for (points, name, color) in [(train, "train", BLUE), (val, "validation", RED)] {
                    if points.is_empty() {
                        continue;
                    }
                    chart
                        .draw_series(
                            LineSeries::new(points.iter().copied(), color.stroke_width(2))
                                .point_size(3),
                        )
                        .map_err(plot_err)?
                        .label(name)
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                        });
                }
                chart
                    .configure_series_labels()
                    .position(if is_acc {
                        SeriesLabelPosition::LowerRight
                    } else {
                        SeriesLabelPosition::UpperRight
                    })
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK)
                    .label_font(("sans-serif", 14))
                    .draw()
                    .map_err(plot_err)?;
            }
            Ok(())
        },
        |_| {},
    )
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
    pub(in crate::notebook) fn colors(fig: &Figure) -> usize {
        let img = image::load_from_memory(fig.png()).unwrap().to_rgb8();
        assert_eq!((img.width(), img.height()), (fig.width(), fig.height()));
        img.pixels().map(|p| p.0).collect::<std::collections::HashSet<_>>().len()
    }

    /// Saves `fig` under `$TRAINBOOK_TEST_PLOTS` when set, to look at the figures.
    pub(in crate::notebook) fn keep(fig: &Figure, name: &str) {
        if let Some(dir) = std::env::var_os("TRAINBOOK_TEST_PLOTS") {
            fig.save(Path::new(&dir).join(name)).unwrap();
        }
    }

    fn record(epoch: u64, val: bool) -> EpochRecord {
        let e = epoch as f64;
        EpochRecord {
            epoch,
            train_loss: 2.0 / (1.0 + e),
            train_acc: 0.5 + 0.04 * e,
            val_loss: val.then_some(2.2 / (1.0 + e)),
            val_acc: val.then_some(0.45 + 0.04 * e),
            lr: 0.1,
            world_size: 1,
            seconds: 10.0,
            img_per_s: 1000.0,
            data_wait_s: vec![0.5],
        }
    }

    #[test]
    fn curves_render() {
        let history: Vec<EpochRecord> = (1..=8).map(|e| record(e, e != 3)).collect();
        let fig = loss_accuracy_curves(&history).unwrap();
        keep(&fig, "curves.png");
        assert_eq!((fig.width(), fig.height()), (1000, 400));
        assert!(colors(&fig) > 50);
        let one = loss_accuracy_curves(&[record(0, false)]).unwrap();
        keep(&one, "curves_one.png");
        assert!(colors(&one) > 20);
        assert!(matches!(loss_accuracy_curves(&[]), Err(Error::InvalidArgument(_))));
    }
}
