//! `confusion_matrix_plot`: a confusion matrix as a heat map, each count in its cell and each
//! class's accuracy beside its row, drawn on the same canvas and fonts as the other plots.
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{FontStyle, FontTransform};

use super::figure::{ensure_font, fit_text, plot_err, render, Figure};
use crate::train::ConfusionMatrix;
use crate::{Error, Result};

/// Heat map of `counts[true][predicted]`, coloured by the fraction of each true class, with
/// every count written in its cell and each class's accuracy (recall) beside its row (like
/// scikit-learn's `ConfusionMatrixDisplay`). Errors: [`Error::InvalidArgument`] unless the
/// matrix is square and non-empty with one name per class; [`Error::Plot`] when no font is
/// found.
pub fn confusion_matrix_plot(matrix: &ConfusionMatrix, class_names: &[String]) -> Result<Figure> {
    let n = matrix.classes();
    if n == 0 || matrix.counts.iter().any(|row| row.len() != n) || class_names.len() != n {
        let msg = format!(
            "need a square matrix and one name per class, got {n} rows and {} names",
            class_names.len()
        );
        return Err(Error::InvalidArgument(format!("confusion_matrix_plot: {msg}")));
    }
    ensure_font()?;
    // About 120 px per class, smaller cells for many classes.
    let cell: i32 = if n <= 10 { 120 } else { (1200 / n as i32).max(28) };
    let name_font = FontDesc::new(
        FontFamily::SansSerif,
        (cell as f64 * 0.14).clamp(10.0, 16.0),
        FontStyle::Normal,
    );
    let name_w = class_names
        .iter()
        .map(|s| name_font.box_size(s).map(|b| b.0).unwrap_or(0))
        .max()
        .unwrap_or(0);
    let (left, top, right, bottom) = (40 + (name_w as i32 + 10).min(200), 100, 110, 30);
    let grid = n as i32 * cell;
    let width = (left + grid + right).max(400) as u32;
    let height = (top + grid + bottom).max(400) as u32;
    let accs = matrix.per_class_accuracy();
    let title = format!(
        "Confusion matrix: accuracy {:.2}% of {}",
        100.0 * matrix.accuracy(),
        matrix.total()
    );
    render(
        width,
        height,
        |root| {
            let centered = |size: f64| {
                TextStyle::from(("sans-serif", size).into_font())
                    .pos(Pos::new(HPos::Center, VPos::Center))
            };
            let right_aligned =
                TextStyle::from(name_font.clone()).pos(Pos::new(HPos::Right, VPos::Center));
            let draw = |e: Text<'_, (i32, i32), String>| root.draw(&e).map_err(plot_err);
            draw(Text::new(title.clone(), (width as i32 / 2, 28), centered(20.0)))?;
            draw(Text::new("predicted".into(), (left + grid / 2, top - 50), centered(16.0)))?;
            draw(Text::new(
                "accuracy".into(),
                (left + grid + right / 2, top - 15),
                centered(14.0),
            ))?;
            let rotated = centered(16.0).transform(FontTransform::Rotate270);
            draw(Text::new("true".into(), (15, top + grid / 2), rotated))?;
            let count_size = (cell as f64 * 0.22).clamp(8.0, 24.0);
            for (i, row) in matrix.counts.iter().enumerate() {
                let row_total: u64 = row.iter().sum();
                let y = top + i as i32 * cell;
                for (j, &count) in row.iter().enumerate() {
                    let x = left + j as i32 * cell;
                    let f = if row_total == 0 { 0.0 } else { count as f64 / row_total as f64 };
                    root.draw(&Rectangle::new(
                        [(x, y), (x + cell, y + cell)],
                        heat_color(f).filled(),
                    ))
                    .map_err(plot_err)?;
                    let ink = if f > 0.5 { WHITE } else { BLACK };
                    draw(Text::new(
                        count.to_string(),
                        (x + cell / 2, y + cell / 2),
                        centered(count_size).color(&ink),
                    ))?;
                }
                let name = fit_text(&class_names[i], &name_font, 200);
                draw(Text::new(name, (left - 8, y + cell / 2), right_aligned.clone()))?;
                let acc = if accs[i].is_finite() {
                    format!("{:.1}%", 100.0 * accs[i])
                } else {
                    "n/a".into()
                };
                draw(Text::new(acc, (left + grid + right / 2, y + cell / 2), centered(14.0)))?;
            }
            for (j, name) in class_names.iter().enumerate() {
                let name = fit_text(name, &name_font, cell as u32 - 4);
                let style =
                    TextStyle::from(name_font.clone()).pos(Pos::new(HPos::Center, VPos::Bottom));
                draw(Text::new(name, (left + j as i32 * cell + cell / 2, top - 6), style))?;
            }
            root.draw(&Rectangle::new(
                [(left, top), (left + grid, top + grid)],
                BLACK.stroke_width(1),
            ))
            .map_err(plot_err)?;
            Ok(())
        },
        |_| {},
    )
}

/// Colour of a row-normalised fraction: white to dark blue.
fn heat_color(f: f64) -> RGBColor {
    let f = if f.is_finite() { f.clamp(0.0, 1.0) } else { 0.0 };
    let mix = |a: u8, b: u8| (a as f64 + (b as f64 - a as f64) * f).round() as u8;
    RGBColor(mix(247, 8), mix(251, 48), mix(255, 107))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::figure::tests::{colors, keep};

    #[test]
    fn confusion_matrix_renders_and_saves() {
        let m = ConfusionMatrix { counts: vec![vec![50, 2, 0], vec![5, 40, 5], vec![0, 0, 0]] };
        let names: Vec<String> =
            ["cat", "dog", "a rather long class name"].iter().map(|s| s.to_string()).collect();
        let fig = confusion_matrix_plot(&m, &names).unwrap();
        keep(&fig, "confusion.png");
        assert!(fig.width() >= 400 && fig.height() >= 400 && fig.width() >= 3 * 120);
        assert!(colors(&fig) > 50);
        let dir = std::env::temp_dir().join(format!("trainbook-plot-{}", std::process::id()));
        let path = dir.join("nested/cm.png");
        fig.save(&path).unwrap();
        assert!(std::fs::metadata(&path).unwrap().len() > 2000);
        assert_eq!(std::fs::read(&path).unwrap(), fig.png());
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(confusion_matrix_plot(&m, &names[..2]).is_err());
        // Outside a notebook nothing is shown.
        if !crate::display::in_notebook() {
            assert!(!fig.show().unwrap());
        }
    }
}
