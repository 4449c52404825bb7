//! The line `fit` prints after every epoch (on rank 0): the epoch's training and validation
//! figures, the EMA's validation when there is one, the rate, the mean gradient norm when
//! clipping, the throughput and the time spent waiting for data.
use crate::train::{data_wait_note, EpochRecord};

/// `epoch 3/10: train loss .. acc ..% | val loss .. acc ..% | [ema ... | ]lr .. | [grad norm .. | ]..
/// img/s | data wait ..`, from the epoch's record; `train_seconds` is the training part of it
/// (what the data wait is a share of).
pub(super) fn epoch_line(epochs: u64, r: &EpochRecord, train_seconds: f64) -> String {
    let pct = |a: Option<f64>| a.map_or(f64::NAN, |a| a * 100.0);
    let ema_note = match (r.ema_val_loss, r.ema_val_acc) {
        (Some(loss), acc) => format!("ema val loss {loss:.4} acc {:.2}% | ", pct(acc)),
        _ => String::new(),
    };
    let norm = r.grad_norm.map_or(String::new(), |n| format!("grad norm {n:.3} | "));
    format!(
        "epoch {}/{epochs}: train loss {:.4} acc {:.2}% | val loss {:.4} acc {:.2}% | {ema_note}lr {:.2e} | {norm}{:.1} img/s | {}",
        r.epoch + 1,
        r.train_loss,
        r.train_acc * 100.0,
        r.val_loss.unwrap_or(f64::NAN),
        pct(r.val_acc),
        r.lr,
        r.img_per_s,
        data_wait_note(&r.data_wait_s, train_seconds)
    )
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
    }
}
