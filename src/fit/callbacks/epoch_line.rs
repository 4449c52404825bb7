//! The line `fit` prints after every epoch (on rank 0), as a callback: the epoch's training and
//! validation figures, the EMA's validation when there is one, the rate, the mean gradient norm
//! when clipping, the throughput and the time spent waiting for data.
use crate::fit::callbacks::{Callback, FitStart};
use crate::train::{data_wait_note, EpochRecord, EpochSummary};
use crate::Result;

/// Prints [`epoch_line`] on rank 0 at the end of every epoch.
#[derive(Default)]
pub(crate) struct EpochLine {
    /// The run's epochs in all, on rank 0 once the run started (`None` elsewhere).
    epochs: Option<u64>,
    /// The seconds of the epoch's training part (what its data wait is a share of).
    train_seconds: f64,
}

impl Callback for EpochLine {
    fn on_fit_start(&mut self, start: &FitStart) -> Result<()> {
        self.epochs = (start.rank == 0).then_some(start.epochs);
        Ok(())
    }
    fn on_train_epoch_end(&mut self, _epoch: u64, train: &EpochSummary, _steps: u64) -> Result<()> {
        self.train_seconds = train.seconds;
        Ok(())
    }
    fn on_epoch_end(&mut self, record: &EpochRecord, _steps_done: u64) -> Result<()> {
        if let Some(epochs) = self.epochs {
            println!("{}", epoch_line(epochs, record, self.train_seconds));
        }
        Ok(())
    }
}

/// `epoch 3/10: train loss .. acc ..% | val loss .. acc ..% | [ema ... | ]lr .. | [grad norm .. | ]..
/// img/s | data wait ..`, from the epoch's record; `train_seconds` is the training part of it
/// (what the data wait is a share of). A regression shows `mae .. rmse ..` and a multi-label
/// run `f1 ..` in place of the accuracy; a top-k accuracy follows the accuracy, the run's own
/// metrics follow the training's and the validation's figures (`f1_macro 0.8123`).
pub(crate) fn epoch_line(epochs: u64, r: &EpochRecord, train_seconds: f64) -> String {
    let ema_note = match (r.ema_val_loss, r.ema_val_acc) {
        (Some(loss), Some(acc)) => format!("ema val loss {loss:.4} acc {:.2}% | ", acc * 100.0),
        (Some(loss), None) => format!("ema val loss {loss:.4} | "),
        _ => String::new(),
    };
    let norm = r.grad_norm.map_or(String::new(), |n| format!("grad norm {n:.3} | "));
    let mut train =
        metrics(r.train_mae, r.train_rmse, r.train_f1, Some(r.train_acc), r.train_top_k);
    let mut val = metrics(r.val_mae, r.val_rmse, r.val_f1, r.val_acc, r.val_top_k);
    for (key, value) in &r.own_metrics {
        let Some(v) = value.as_f64() else { continue };
        if let Some(name) = key.strip_prefix("val_") {
            val.push_str(&format!(" {name} {v:.4}"));
        } else if let Some(name) = key.strip_prefix("train_") {
            train.push_str(&format!(" {name} {v:.4}"));
        }
    }
    // The largest rank's peak, as torch.cuda.max_memory_allocated reports it on that GPU.
    let memory = r.max_memory_allocated.iter().max().map_or(String::new(), |&bytes| {
        format!(" | peak GPU memory {:.2} GiB", bytes as f64 / f64::from(1 << 30))
    });
    format!(
        "epoch {}/{epochs}: train loss {:.4} {train} | val loss {:.4} {val} | {ema_note}lr {:.2e} | {norm}{:.1} img/s | {}{memory}",
        r.epoch + 1,
        r.train_loss,
        r.val_loss.unwrap_or(f64::NAN),
        r.lr,
        r.img_per_s,
        data_wait_note(&r.data_wait_s, train_seconds)
    )
}

/// The task's metrics of one side (training or validation): `mae .. rmse ..`, `f1 ..`, or
/// `acc ..%` with `top-k ..%` when counted.
fn metrics(
    mae: Option<f64>,
    rmse: Option<f64>,
    f1: Option<f64>,
    acc: Option<f64>,
    top_k: Option<f64>,
) -> String {
    let top_k = top_k.map_or(String::new(), |t| format!(" top-k {:.2}%", t * 100.0));
    match (mae, rmse, f1) {
        (Some(mae), Some(rmse), _) => format!("mae {mae:.4} rmse {rmse:.4}"),
        (_, _, Some(f1)) => format!("f1 {f1:.4}"),
        _ => format!("acc {:.2}%{top_k}", acc.map_or(f64::NAN, |a| a * 100.0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_shows_what_the_epoch_had() {
        let mut r = EpochRecord {
            epoch: 2,
            train_loss: 0.5,
            train_acc: 0.8,
            val_loss: Some(0.25),
            val_acc: Some(0.9),
            lr: 1e-3,
            img_per_s: 100.0,
            data_wait_s: vec![0.0],
            ..Default::default()
        };
        let line = epoch_line(10, &r, 10.0);
        assert!(line.starts_with("epoch 3/10: train loss 0.5000 acc 80.00% | val loss 0.2500 acc 90.00% | lr 1.00e-3 | 100.0 img/s | "), "{line}");
        (r.ema_val_loss, r.ema_val_acc, r.grad_norm) = (Some(0.3), Some(0.85), Some(1.5));
        let line = epoch_line(10, &r, 10.0);
        assert!(
            line.contains(
                "| ema val loss 0.3000 acc 85.00% | lr 1.00e-3 | grad norm 1.500 | 100.0 img/s"
            ),
            "{line}"
        );
        let regression = EpochRecord {
            train_acc: f64::NAN,
            val_acc: None,
            train_mae: Some(0.5),
            train_rmse: Some(0.75),
            val_mae: Some(0.25),
            val_rmse: Some(0.5),
            ..r.clone()
        };
        let line = epoch_line(10, &regression, 10.0);
        assert!(line.starts_with("epoch 3/10: train loss 0.5000 mae 0.5000 rmse 0.7500 | val loss 0.2500 mae 0.2500 rmse 0.5000 | "), "{line}");
        assert!(!epoch_line(10, &r, 10.0).contains("GPU"), "no GPU, no memory figure");
        let gpus = EpochRecord { max_memory_allocated: vec![1 << 30, 3 << 29], ..r.clone() };
        assert!(epoch_line(10, &gpus, 10.0).ends_with(" | peak GPU memory 1.50 GiB"));
        let top5 = EpochRecord { train_top_k: Some(0.9), val_top_k: Some(0.95), ..r };
        assert!(epoch_line(10, &top5, 10.0).contains("acc 90.00% top-k 95.00% |"));
    }
}
