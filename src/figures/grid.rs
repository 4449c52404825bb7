//! `image_grid`: a grid of sample images with a title above each (labels, predictions),
//! drawn on the same canvas and fonts as the other plots.
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::FontStyle;
use tch::{Kind, Tensor};

use super::figure::{ensure_font, fit_text, plot_err, render, Figure};
use crate::{Error, Result};

/// Images `[N, C, H, W]` (C = 1 or 3, floats in [0, 1], clamped; any device) in a grid of
/// `columns` columns, each with its title above it (like a matplotlib `subplots` grid of
/// `imshow`s). Small images are enlarged (nearest neighbour) so each is at least about 96 px.
/// A title may have several lines, separated by `\n` (a prediction above, the true class
/// below); every row of the grid leaves room for the longest. Pass images before `Normalize`,
/// or undo it first.
///
/// Errors: [`Error::InvalidArgument`] for another shape, no images, a title count other than
/// N, or 0 columns; [`Error::Plot`] when no font is found or drawing fails.
pub fn image_grid(images: &Tensor, titles: &[String], columns: usize) -> Result<Figure> {
    let size = images.size();
    let &[n, c, h, w] = size.as_slice() else {
        return Err(Error::InvalidArgument(format!(
            "image_grid: images must be [N, C, H, W], got {size:?}"
        )));
    };
    if n <= 0 || h <= 0 || w <= 0 || !(c == 1 || c == 3) {
        return Err(Error::InvalidArgument(format!(
            "image_grid: need N > 0 images of 1 or 3 channels, got {size:?}"
        )));
    }
    if titles.len() != n as usize || columns == 0 {
        let msg = format!(
            "{} titles for {n} images, {columns} columns (need one title each)",
            titles.len()
        );
        return Err(Error::InvalidArgument(format!("image_grid: {msg}")));
    }
    let (n, c, h, w) = (n as usize, c as usize, h as usize, w as usize);
    let pixels: Vec<u8> = Vec::try_from(
        (images
            .to_device(tch::Device::Cpu)
            .to_kind(Kind::Float)
            .nan_to_num(0.0, 1.0, 0.0)
            .clamp(0.0, 1.0)
            * 255.0)
            .round()
            .to_kind(Kind::Uint8)
            .contiguous()
            .flatten(0, -1),
    )?;
    ensure_font()?;
    let scale = 96usize.div_ceil(h.max(w)).max(1);
    let (iw, ih) = (w * scale, h * scale);
    let font = FontDesc::new(FontFamily::SansSerif, 14.0, FontStyle::Normal);
    let title_w = titles
        .iter()
        .flat_map(|t| t.lines())
        .map(|t| font.box_size(t).map(|b| b.0 as usize).unwrap_or(0))
        .max()
        .unwrap_or(0);
    let cell_w = iw.max(title_w.min(240) + 4);
    let line_h = 22usize;
    let lines = titles.iter().map(|t| t.lines().count()).max().unwrap_or(1).max(1);
    let (pad, title_h) = (8usize, line_h * lines);
    let columns = columns.min(n);
    let rows = n.div_ceil(columns);
    let width = columns * (cell_w + pad) + pad;
    let height = rows * (title_h + ih + pad) + pad;
    let origin = |k: usize| {
        (pad + (k % columns) * (cell_w + pad), pad + (k / columns) * (title_h + ih + pad))
    };
    let blit = |img: &mut image::RgbImage| {
        let plane = h * w;
        for k in 0..n {
            let (x, y) = origin(k);
            let (x, base) = (x + (cell_w - iw) / 2, k * c * plane);
            for (py, px) in (0..ih).flat_map(|py| (0..iw).map(move |px| (py, px))) {
                let src = (py / scale) * w + px / scale;
                let ch = |i: usize| pixels[base + i.min(c - 1) * plane + src];
                img.put_pixel(
                    (x + px) as u32,
                    (y + title_h + py) as u32,
                    image::Rgb([ch(0), ch(1), ch(2)]),
                );
            }
        }
    };
    render(
        width as u32,
        height as u32,
        |root| {
            let style = TextStyle::from(font.clone()).pos(Pos::new(HPos::Center, VPos::Center));
            for (k, title) in titles.iter().enumerate() {
                let (x, y) = origin(k);
                for (j, line) in title.lines().enumerate() {
                    let text = fit_text(line, &font, cell_w as u32);
                    let centre = (x + cell_w / 2, y + j * line_h + line_h / 2);
                    root.draw(&Text::new(text, (centre.0 as i32, centre.1 as i32), style.clone()))
                        .map_err(plot_err)?;
                }
            }
            Ok(())
        },
        blit,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::figure::tests::{colors, keep};

    #[test]
    fn image_grid_renders() {
        let gray = Tensor::rand([5, 1, 28, 28], (Kind::Float, tch::Device::Cpu)) * 1.4 - 0.2;
        let titles: Vec<String> =
            (0..5).map(|i| format!("label {i} / pred {}", (i * 3) % 5)).collect();
        let fig = image_grid(&gray, &titles, 3).unwrap();
        keep(&fig, "grid_gray.png");
        // 28 px enlarged 4x = 112 px images, 3 columns and 2 rows.
        assert!(fig.width() >= 3 * 112 && fig.height() >= 2 * (112 + 22));
        assert!(colors(&fig) > 100);
        let rgb = Tensor::rand([2, 3, 32, 32], (Kind::Float, tch::Device::Cpu));
        let fig = image_grid(&rgb, &titles[..2], 8).unwrap();
        keep(&fig, "grid_rgb.png");
        assert!(colors(&fig) > 1000);
        assert!(image_grid(&rgb, &titles[..1], 2).is_err());
        assert!(image_grid(&rgb.narrow(0, 0, 0), &[], 2).is_err());
        assert!(image_grid(
            &Tensor::zeros([2, 2, 8, 8], (Kind::Float, tch::Device::Cpu)),
            &titles[..2],
            2
        )
        .is_err());
    }

    #[test]
    fn a_title_of_two_lines_gets_a_second_line_and_its_width_is_its_longest_line() {
        let rgb = Tensor::rand([2, 3, 48, 48], (Kind::Float, tch::Device::Cpu));
        let long = "orange vertical stripes 92% (true: red disc)".to_string();
        let one = image_grid(&rgb, &[long.clone(), "red disc 47%".into()], 2).unwrap();
        let two = image_grid(
            &rgb,
            &["orange vertical stripes 92%\n(true: red disc)".into(), "red disc 47%".into()],
            2,
        )
        .unwrap();
        keep(&two, "grid_two_lines.png");
        // One more line of 22 px above the row; the cells narrow to the longer line, which is
        // shorter than the one-line title (drawn cut to 240 px).
        assert_eq!(two.height(), one.height() + 22);
        assert!(two.width() < one.width(), "{} against {}", two.width(), one.width());
    }
}
