//! The metrics log: `metrics.jsonl`, one JSON object per epoch, that plots, notebooks and
//! resumption read back.
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::epoch::EpochSummary;
use crate::{Error, Result, WithPath};

/// One epoch of training and validation. Accuracies are fractions in [0, 1].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EpochRecord {
    /// The epoch, 0-based.
    pub epoch: u64,
    /// Mean per-sample training loss over the epoch (all ranks).
    pub train_loss: f64,
    /// Training accuracy over the epoch, a fraction in [0, 1].
    pub train_acc: f64,
    /// Mean per-sample validation loss; `None` when the epoch was not evaluated.
    pub val_loss: Option<f64>,
    /// Validation accuracy in [0, 1]; `None` when the epoch was not evaluated.
    pub val_acc: Option<f64>,
    /// The learning rate used during the epoch (with a per-step schedule: the rate after its
    /// last optimizer step).
    pub lr: f64,
    /// Number of ranks that trained the epoch.
    pub world_size: usize,
    /// Wall-clock seconds of training plus validation.
    pub seconds: f64,
    /// Training throughput in images per second, all ranks together.
    pub img_per_s: f64,
    /// Seconds each rank waited for its training data loader (absent in older logs).
    #[serde(default)]
    pub data_wait_s: Vec<f64>,
    /// With norm clipping: the epoch's mean total gradient norm before clipping (absent
    /// otherwise, and in older logs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grad_norm: Option<f64>,
    /// With an EMA of the weights (`Trainer::ema`): the validation loss of the averaged
    /// weights (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ema_val_loss: Option<f64>,
    /// With an EMA of the weights: the validation accuracy of the averaged weights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ema_val_acc: Option<f64>,
}

impl EpochRecord {
    /// The record of epoch `epoch` (0-based) from its training summary, its validation summary
    /// if there was one, and the learning rate used.
    ///
    /// ```no_run
    /// # use trainbook::train::*;
    /// # fn run(t: EpochSummary, v: EpochSummary, opt: Optimizer) {
    /// let record = EpochRecord::from_summaries(3, &t, Some(&v), opt.lr());
    /// # }
    /// ```
    pub fn from_summaries(
        epoch: u64,
        train: &EpochSummary,
        val: Option<&EpochSummary>,
        lr: f64,
    ) -> EpochRecord {
        EpochRecord {
            epoch,
            train_loss: train.loss,
            train_acc: train.accuracy,
            val_loss: val.map(|v| v.loss),
            val_acc: val.map(|v| v.accuracy),
            lr,
            world_size: train.data_wait_s.len().max(1),
            seconds: train.seconds + val.map_or(0.0, |v| v.seconds),
            img_per_s: train.img_per_s,
            data_wait_s: train.data_wait_s.clone(),
            grad_norm: train.grad_norm,
            ema_val_loss: None,
            ema_val_acc: None,
        }
    }
}

/// Appends `record` to the JSON-lines file at `path` (created if missing).
pub fn append_record(path: &Path, record: &EpochRecord) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_path(dir)?;
    }
    let mut line =
        serde_json::to_string(record).map_err(|e| Error::InvalidArgument(e.to_string()))?;
    line.push('\n');
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path).with_path(path)?;
    f.write_all(line.as_bytes()).with_path(path)
}

/// Reads every record of a metrics log; a malformed line is an error naming the line.
pub fn read_records(path: &Path) -> Result<Vec<EpochRecord>> {
    let text = std::fs::read_to_string(path).with_path(path)?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| {
                Error::parse(path, "metrics log (JSON lines)", format!("line {}: {e}", i + 1))
            })
        })
        .collect()
}
