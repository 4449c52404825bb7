//! The metrics log: `metrics.jsonl`, one JSON object per epoch, that plots, notebooks and
//! resumption read back.
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::epoch::EpochSummary;
use crate::{Error, Result, WithPath};

/// One epoch of training and validation. Accuracies are fractions in [0, 1]. The task's own
/// metrics (errors for regression, F1 for multi-label, top-k) are present only for runs of
/// that task, so a classification's log lines hold exactly the fields they always had.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EpochRecord {
    /// The epoch, 0-based.
    pub epoch: u64,
    /// Mean per-sample training loss over the epoch (all ranks).
    pub train_loss: f64,
    /// Training accuracy over the epoch, a fraction in [0, 1] (multi-label: the exact-match
    /// ratio); NaN for regression (`null` in the file).
    #[serde(deserialize_with = "null_as_nan")]
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
    /// On CUDA: each rank's peak of allocated bytes on its GPU during the epoch's training
    /// (`torch.cuda.max_memory_allocated`; absent on the CPU and in older logs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub max_memory_allocated: Vec<u64>,
    /// On CUDA: each rank's peak of reserved bytes (`torch.cuda.max_memory_reserved`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub max_memory_reserved: Vec<u64>,
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
    /// Regression: the training mean absolute error over every target value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub train_mae: Option<f64>,
    /// Regression: the training root mean squared error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub train_rmse: Option<f64>,
    /// Regression: the validation mean absolute error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub val_mae: Option<f64>,
    /// Regression: the validation root mean squared error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub val_rmse: Option<f64>,
    /// Multi-label: the training macro F1 score (the mean of the per-label scores).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub train_f1: Option<f64>,
    /// Multi-label: the validation macro F1 score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub val_f1: Option<f64>,
    /// Multi-label: the validation F1 score of every label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub val_f1_per_label: Option<Vec<f64>>,
    /// With a top-k count (`Trainer::top_k`): the training top-k accuracy in [0, 1].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub train_top_k: Option<f64>,
    /// With a top-k count: the validation top-k accuracy in [0, 1].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub val_top_k: Option<f64>,
    /// The run's own metrics ([`Trainer::metric`](crate::fit::Trainer::metric),
    /// [`Trainer::train_metric`](crate::fit::Trainer::train_metric)), as top-level keys of the
    /// line: `val_<name>` and `train_<name>` (a number, `null` when not finite) and, where the
    /// metric has them, `val_<name>_per_class` / `train_<name>_per_class` (a list). Read one
    /// with [`metric`](Self::metric).
    #[serde(flatten)]
    pub own_metrics: BTreeMap<String, serde_json::Value>,
}

/// The own metrics of `summary` as a record's keys, each name after `prefix`.
pub(crate) fn own_metric_keys(
    prefix: &str,
    summary: &EpochSummary,
) -> BTreeMap<String, serde_json::Value> {
    let mut keys = BTreeMap::new();
    for m in &summary.user_metrics {
        keys.insert(format!("{prefix}_{}", m.name), serde_json::Value::from(m.value));
        if let Some(per_class) = &m.per_class {
            keys.insert(format!("{prefix}_{}_per_class", m.name), serde_json::json!(per_class));
        }
    }
    keys
}

/// A number that the file may hold as `null` (serde_json writes NaN so): NaN.
fn null_as_nan<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
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
            val_acc: val
                .and_then(|v| (v.task != crate::train::Task::Regression).then_some(v.accuracy)),
            lr,
            world_size: train.data_wait_s.len().max(1),
            seconds: train.seconds + val.map_or(0.0, |v| v.seconds),
            img_per_s: train.img_per_s,
            data_wait_s: train.data_wait_s.clone(),
            max_memory_allocated: train.max_memory.iter().map(|m| m.0).collect(),
            max_memory_reserved: train.max_memory.iter().map(|m| m.1).collect(),
            grad_norm: train.grad_norm,
            ema_val_loss: None,
            ema_val_acc: None,
            train_mae: train.mae(),
            train_rmse: train.rmse(),
            val_mae: val.and_then(EpochSummary::mae),
            val_rmse: val.and_then(EpochSummary::rmse),
            train_f1: train.f1_macro(),
            val_f1: val.and_then(EpochSummary::f1_macro),
            val_f1_per_label: val.and_then(EpochSummary::f1_per_label),
            train_top_k: train.top_k_accuracy(),
            val_top_k: val.and_then(EpochSummary::top_k_accuracy),
            own_metrics: {
                let mut keys = own_metric_keys("train", train);
                keys.extend(val.map_or_else(BTreeMap::new, |v| own_metric_keys("val", v)));
                keys
            },
        }
        .with_finite()
    }

    /// The record with the validation of the weights' average (`ema_val_loss`, `ema_val_acc`)
    /// from `ema`.
    pub(crate) fn with_ema(mut self, ema: Option<&EpochSummary>) -> EpochRecord {
        self.ema_val_loss = ema.map(|e| e.loss);
        self.ema_val_acc =
            ema.and_then(|e| (e.task != crate::train::Task::Regression).then_some(e.accuracy));
        self
    }

    /// The value of key `key` of the run's own metrics (`val_f1_macro`), when the epoch has a
    /// finite one.
    pub fn metric(&self, key: &str) -> Option<f64> {
        self.own_metrics.get(key).and_then(serde_json::Value::as_f64)
    }

    /// The record with every optional metric that is not a finite number left out (an epoch
    /// without samples has none).
    fn with_finite(mut self) -> EpochRecord {
        for v in [
            &mut self.train_mae,
            &mut self.train_rmse,
            &mut self.val_mae,
            &mut self.val_rmse,
            &mut self.train_f1,
            &mut self.val_f1,
            &mut self.train_top_k,
            &mut self.val_top_k,
        ] {
            *v = v.filter(|v| v.is_finite());
        }
        self
    }
}

/// The history as a text table, one row per epoch: the epoch (from 1), the training loss and
/// accuracy, the held-out split's loss and accuracy (`held_out` names it in the header: "val"
/// or "test") and the learning rate; a regression shows the mean absolute error in place of the
/// accuracy. Columns are right-aligned to their widest entry; missing values show as `-`.
///
/// ```
/// use trainbook::train::{history_table, EpochRecord};
/// let r = EpochRecord { epoch: 0, train_loss: 1.5, train_acc: 0.4, val_loss: Some(1.2),
///     val_acc: Some(0.5), lr: 0.01, ..Default::default() };
/// let table = history_table(&[r], "val");
/// assert_eq!(table.lines().nth(1), Some("    1      1.5000      40.0%    1.2000    50.0%  1e-2"));
/// ```
pub fn history_table(history: &[EpochRecord], held_out: &str) -> String {
    let regression = history.iter().any(|r| r.train_mae.is_some());
    let metric = if regression { "mae" } else { "acc" };
    let header = [
        "epoch".to_string(),
        "train loss".into(),
        format!("train {metric}"),
        format!("{held_out} loss"),
        format!("{held_out} {metric}"),
        "lr".into(),
    ];
    let number = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.4}"));
    let percent = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.1}%", v * 100.0));
    let rows: Vec<[String; 6]> = history
        .iter()
        .map(|r| {
            let (train, held) = if regression {
                (number(r.train_mae), number(r.val_mae))
            } else {
                (percent(Some(r.train_acc)), percent(r.val_acc))
            };
            let lr = format!("{:.0e}", r.lr);
            [
                (r.epoch + 1).to_string(),
                number(Some(r.train_loss)),
                train,
                number(r.val_loss),
                held,
                lr,
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..6)
        .map(|k| rows.iter().map(|row| row[k].len()).chain([header[k].len()]).max().unwrap_or(0))
        .collect();
    let line = |cells: &[String; 6]| {
        let padded: Vec<String> =
            cells.iter().zip(&widths).map(|(c, w)| format!("{c:>w$}")).collect();
        padded.join("  ")
    };
    std::iter::once(line(&header)).chain(rows.iter().map(line)).collect::<Vec<_>>().join("\n")
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
