//! The training history as curves: the loss and the task's metric per epoch (accuracy, the
//! mean absolute error of a regression, the macro F1 of a multi-label run), training against
//! validation.
use plotters::prelude::*;

use super::figure::{plot_err, render, Figure};
use crate::train::EpochRecord;
use crate::{Error, Result};

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

/// A curve's (epoch, value) points: training, then validation.
type Series = (Vec<(i64, f64)>, Vec<(i64, f64)>);

/// The largest loss over the smallest above which the loss panel has a log scale: one decade.
/// On a plain axis the lowest values then sit in the bottom tenth of the panel, and a training
/// loss between 2.2 and 2.7 under a validation loss of 24 is a flat line at the bottom.
const LOG_SCALE_SPAN: f64 = 10.0;

/// Whether the finite losses of both series are all positive and their largest is more than
/// [`LOG_SCALE_SPAN`] times their smallest.
fn loss_spans_decades(loss: &Series) -> bool {
    let values = || loss.0.iter().chain(&loss.1).map(|p| p.1);
    let (lo, hi) = values().fold((f64::INFINITY, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    lo > 0.0 && hi / lo > LOG_SCALE_SPAN
}

/// `v` with three significant digits (0.0123, 1.23, 123, 12300), for log-scale tick labels.
fn significant(v: f64) -> String {
    let decimals = (2 - v.abs().log10().floor() as i32).max(0) as usize;
    format!("{v:.decimals$}")
}

/// The epoch a record is plotted at: numbered from 1, as every printed epoch line counts
/// (`EpochRecord::epoch` counts from 0).
fn shown_epoch(r: &EpochRecord) -> i64 {
    r.epoch as i64 + 1
}

/// The x range of the curves: the first to the last epoch shown, widened by one on each side
/// for a single epoch.
fn epoch_axis(history: &[EpochRecord]) -> (i64, i64) {
    let epochs = || history.iter().map(shown_epoch);
    let (x0, x1) = (epochs().min().unwrap_or(1), epochs().max().unwrap_or(1));
    if x0 == x1 {
        (x0 - 1, x1 + 1)
    } else {
        (x0, x1)
    }
}

/// Loss (left) and accuracy in % (right) per epoch, training against validation (validation
/// points only for the epochs that have them), as a 1000x400 figure; epochs are numbered from
/// 1 as the epoch lines print them. A regression's history shows the mean absolute error on
/// the right, a multi-label one the macro F1 in %. When the largest loss is more than ten times
/// the smallest, the loss panel has a log scale (its ticks labelled with the losses, its axis
/// "loss (log scale)"), so that a validation loss far above the training loss does not flatten
/// the training curve. Errors:
/// [`Error::InvalidArgument`] for an empty history; [`Error::Plot`] when no font is found.
pub fn loss_accuracy_curves(history: &[EpochRecord]) -> Result<Figure> {
    if history.is_empty() {
        return Err(Error::InvalidArgument("loss_accuracy_curves: the history is empty".into()));
    }
    let (x0, x1) = epoch_axis(history);
    // (epoch, value) points of the finite values; validation only where it was measured.
    let points = |value: &dyn Fn(&EpochRecord) -> Option<f64>, scale: f64| -> Vec<(i64, f64)> {
        let points = history.iter().filter_map(|r| value(r).map(|v| (shown_epoch(r), v * scale)));
        points.filter(|p| p.1.is_finite()).collect()
    };
    let series =
        |train: fn(&EpochRecord) -> f64, val: fn(&EpochRecord) -> Option<f64>, scale: f64| {
            (points(&|r| Some(train(r)), scale), points(&val, scale))
        };
    let mut loss = series(|r| r.train_loss, |r| r.val_loss, 1.0);
    // Losses over more than a decade (a validation loss that jumps far above the training loss
    // while BatchNorm's statistics lag) would flatten the rest: then the panel plots log10 of
    // the loss and labels its ticks with the losses themselves, a log scale.
    let log_loss = loss_spans_decades(&loss);
    let loss_label = if log_loss { "loss (log scale)" } else { "loss" };
    if log_loss {
        for p in loss.0.iter_mut().chain(loss.1.iter_mut()) {
            p.1 = p.1.log10();
        }
    }
    let task_series =
        |train: fn(&EpochRecord) -> Option<f64>,
         val: fn(&EpochRecord) -> Option<f64>,
         scale: f64| { (points(&train, scale), points(&val, scale)) };
    let (right, right_label, is_pct) = if history.iter().any(|r| r.train_mae.is_some()) {
        (task_series(|r| r.train_mae, |r| r.val_mae, 1.0), ("Mean absolute error", "MAE"), false)
    } else if history.iter().any(|r| r.train_f1.is_some()) {
        (task_series(|r| r.train_f1, |r| r.val_f1, 100.0), ("Macro F1", "F1 (%)"), true)
    } else {
        (series(|r| r.train_acc, |r| r.val_acc, 100.0), ("Accuracy", "accuracy (%)"), true)
    };
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
            let specs = [
                ("Loss", loss_label, &loss, false),
                (right_label.0, right_label.1, &right, is_pct),
            ];
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
                        } else if log_loss {
                            significant(10f64.powf(*v))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::figure::tests::{colors, keep};

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
            grad_norm: None,
            ..Default::default()
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
        let regression: Vec<EpochRecord> = (0..4)
            .map(|e| EpochRecord {
                train_acc: f64::NAN,
                val_acc: None,
                train_mae: Some(1.0 / (1.0 + e as f64)),
                val_mae: Some(1.2 / (1.0 + e as f64)),
                ..record(e, true)
            })
            .collect();
        let fig = loss_accuracy_curves(&regression).unwrap();
        keep(&fig, "curves_regression.png");
        assert!(colors(&fig) > 50);
        // A validation loss in the thousands: a log scale.
        let mut jumpy: Vec<EpochRecord> = (0..4).map(|e| record(e, true)).collect();
        jumpy[1].val_loss = Some(32064.8);
        let points = |h: &[EpochRecord]| {
            let v = |r: &EpochRecord| (r.epoch as i64, r.train_loss);
            (h.iter().map(v).collect::<Vec<_>>(), vec![(1, h[1].val_loss.unwrap())])
        };
        assert!(loss_spans_decades(&points(&jumpy)));
        assert!(!loss_spans_decades(&points(&regression)));
        // The threshold is one decade, exclusive: a validation loss 36 times the lowest training
        // loss (it lags while BatchNorm's statistics settle) gets a log scale; a run whose
        // losses fall fivefold, or exactly tenfold, keeps a plain one.
        let span = |hi: f64, lo: f64| loss_spans_decades(&(vec![(1, lo)], vec![(1, hi)]));
        assert!(span(24.3, 0.675));
        assert!(!span(2.3, 0.46));
        assert!(!span(5.0, 0.5));
        assert!(span(5.0, 0.4999));
        keep(&loss_accuracy_curves(&jumpy).unwrap(), "curves_log.png");
        assert_eq!(
            (significant(0.012345), significant(1.2345), significant(32064.8)),
            (String::from("0.0123"), String::from("1.23"), String::from("32065"))
        );
    }

    #[test]
    fn epochs_are_numbered_from_one_as_the_printed_lines() {
        let history: Vec<EpochRecord> = (0..5).map(|e| record(e, true)).collect();
        assert_eq!(epoch_axis(&history), (1, 5));
        assert_eq!(epoch_axis(&history[2..3]), (2, 4), "one epoch (the 3rd), widened");
    }
}
