//! [`LiveCurves`]: the training curves redrawn while a run trains, as a callback. In a
//! notebook the figure appears under the running cell; elsewhere `OUT/curves.png` is rewritten,
//! so an image viewer (or an IDE's preview) shows the run so far.
use std::path::PathBuf;

use crate::figures::loss_accuracy_curves;
use crate::fit::callbacks::{Callback, FitStart};
use crate::train::{read_records, EpochRecord};
use crate::Result;

/// Redraws the loss and metric curves ([`loss_accuracy_curves`]) after every `every`-th epoch,
/// on rank 0: inline in a notebook (evcxr cannot replace a cell's output, so every redraw is a
/// new figure under the cell: choose `every` to keep them few), else into `OUT/curves.png`
/// (which `fit` also writes at the end). A resumed run's curves start with the epochs of
/// `OUT/metrics.jsonl`, as its history does. Lightning's loggers and fastai's `ShowGraph`
/// play this part there.
///
/// ```no_run
/// # use trainbook::prelude::*;
/// # fn f(dist: &Dist) {
/// let trainer = Trainer::new(dist).callback(trainbook::fit::LiveCurves::every(1));
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct LiveCurves {
    every: u64,
    history: Vec<EpochRecord>,
    /// Where to draw outside a notebook; `None` on ranks other than 0.
    file: Option<PathBuf>,
}

impl LiveCurves {
    /// Curves after every `n`-th epoch (and at least after each epoch for `n` 0).
    pub fn every(n: u64) -> LiveCurves {
        LiveCurves { every: n.max(1), history: Vec::new(), file: None }
    }

    /// The epochs drawn so far.
    pub fn history(&self) -> &[EpochRecord] {
        &self.history
    }
}

impl Callback for LiveCurves {
    fn on_fit_start(&mut self, start: &FitStart) -> Result<()> {
        self.file = (start.rank == 0).then(|| start.out.join("curves.png"));
        let log = start.out.join("metrics.jsonl");
        self.history = if start.resumed && log.exists() { read_records(&log)? } else { Vec::new() };
        Ok(())
    }

    fn on_epoch_end(&mut self, record: &EpochRecord, _steps_done: u64) -> Result<()> {
        self.history.push(record.clone());
        let Some(file) = &self.file else { return Ok(()) };
        if (record.epoch + 1) % self.every != 0 {
            return Ok(());
        }
        let figure = loss_accuracy_curves(&self.history)?;
        if !figure.show()? {
            figure.save(file)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(epoch: u64) -> EpochRecord {
        EpochRecord {
            epoch,
            train_loss: 1.0 / (epoch + 1) as f64,
            train_acc: 0.5,
            val_loss: Some(1.1 / (epoch + 1) as f64),
            val_acc: Some(0.4),
            world_size: 1,
            ..Default::default()
        }
    }

    #[test]
    fn the_file_follows_the_epochs_on_rank_0_only() {
        let dir = std::env::temp_dir().join(format!("tb-live-curves-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let start = |rank| FitStart {
            rank,
            world_size: 2,
            out: &dir,
            first_epoch: 0,
            steps_done: 0,
            resumed: false,
            epochs: 1,
            history: &[],
        };
        let mut other = LiveCurves::every(1);
        other.on_fit_start(&start(1)).unwrap();
        other.on_epoch_end(&record(0), 4).unwrap();
        assert!(!dir.join("curves.png").exists(), "rank 1 draws nothing");
        let mut live = LiveCurves::every(2);
        live.on_fit_start(&start(0)).unwrap();
        live.on_epoch_end(&record(0), 4).unwrap();
        assert!(!dir.join("curves.png").exists(), "every 2nd epoch only");
        live.on_epoch_end(&record(1), 8).unwrap();
        let png = std::fs::read(dir.join("curves.png")).unwrap();
        assert!(png.starts_with(b"\x89PNG") && live.history().len() == 2);
        // A resumed run starts from the epochs in metrics.jsonl.
        crate::train::append_record(&dir.join("metrics.jsonl"), &record(0)).unwrap();
        let mut resumed = LiveCurves::every(1);
        resumed.on_fit_start(&FitStart { resumed: true, ..start(0) }).unwrap();
        assert_eq!(resumed.history(), &[record(0)]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
