//! The range test's curve: the smoothed loss against the learning rate on a log scale, with
//! the suggested rate marked (fastai's `plot_lr_find`, which leaves out the last 5 points).
use plotters::prelude::*;

use super::figure::{plot_err, render, Figure};
use crate::train::LrFind;
use crate::{Error, Result};

/// The smoothed loss against log10 of the rate (the last 5 points left out, as fastai plots
/// it), the suggestion as a red dot, as an 800x450 figure. Errors: [`Error::InvalidArgument`]
/// when fewer than 2 points are left; [`Error::Plot`] when no font is found.
pub fn lr_find_plot(found: &LrFind) -> Result<Figure> {
    let keep = found.lrs.len().saturating_sub(5);
    let points: Vec<(f64, f64)> = (found.lrs[..keep].iter().zip(&found.losses[..keep]))
        .filter(|(lr, loss)| lr.is_finite() && loss.is_finite())
        .map(|(lr, loss)| (lr.log10(), *loss))
        .collect();
    if points.len() < 2 {
        return Err(Error::InvalidArgument(format!(
            "lr_find_plot: {} points to plot; the range test took too few steps",
            points.len()
        )));
    }
    let (x0, x1) = (points[0].0, points[points.len() - 1].0);
    let (lo, hi) = points
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| (lo.min(p.1), hi.max(p.1)));
    let pad = ((hi - lo) * 0.08).max(1e-6);
    let draw = |root: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>| {
        let mut chart = ChartBuilder::on(root)
            .caption("Learning-rate range test", ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(x0..x1, (lo - pad)..(hi + pad))
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc("learning rate (log scale)")
            .y_desc("smoothed loss")
            .x_label_formatter(&|v| {
                if (v - v.round()).abs() < 1e-9 {
                    format!("1e{}", v.round() as i64)
                } else {
                    format!("1e{v:.1}")
                }
            })
            .draw()
            .map_err(plot_err)?;
        chart.draw_series(LineSeries::new(points.clone(), &BLUE)).map_err(plot_err)?;
        if let Some((lr, loss)) = found.suggestion {
            let dot = Circle::new((lr.log10(), loss), 5, RED.filled());
            chart.draw_series(std::iter::once(dot)).map_err(plot_err)?;
        }
        Ok(())
    };
    render(800, 450, draw, |_| {})
}
