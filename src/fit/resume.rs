//! Where a run starts: from scratch, or from the newest intact checkpoint with every part's
//! state put back (weights, optimizer, RNGs, the schedule, the float16 loss scale, early
//! stopping's counters, the metrics of the epoch's first part and the metrics log).
use std::cell::RefCell;
use std::path::{Path, PathBuf};

use tch::nn::VarStore;

use crate::checkpoint::{read_tensors_file, Checkpointer, EMA_FILE};
use crate::dist::Dist;
use crate::fit::parts::early_stopping::EarlyStopping;
use crate::fit::parts::run_schedule::RunSchedule;
use crate::train::{read_records, EpochRecord, GradScaler, ModelEma, Optimizer, RunningMetrics};
use crate::Result;

/// The key of early stopping's state in a checkpoint's parts.
pub(crate) const EARLY_STOPPING: &str = "early_stopping";

/// The states of the run's parts for a checkpoint (`Value::Null` when it has none).
pub(crate) fn parts_state(early: &Option<EarlyStopping>) -> serde_json::Value {
    match early {
        Some(e) => serde_json::json!({ EARLY_STOPPING: e }),
        None => serde_json::Value::Null,
    }
}

/// Where the run starts.
#[derive(Default)]
pub(crate) struct Start {
    /// The first epoch to train (0-based).
    pub epoch: u64,
    /// Batches of that epoch already trained.
    pub skip: usize,
    /// The epoch's sums so far.
    pub metrics: RunningMetrics,
    /// The checkpoint resumed from: (directory, epoch, batches done).
    pub resumed_from: Option<(PathBuf, u64, u64)>,
    /// The records of the epochs before `epoch`, from `metrics.jsonl`.
    pub history: Vec<EpochRecord>,
}

/// The run's restorable parts, borrowed for a resume.
pub(crate) struct Parts<'a> {
    pub schedule: &'a RunSchedule,
    pub scaler: Option<&'a RefCell<GradScaler>>,
    pub early: &'a mut Option<EarlyStopping>,
    pub ema: Option<&'a mut ModelEma>,
}

/// Restores the newest intact checkpoint (when `resume` is on and there is one) into the
/// model, the optimizer and the parts; otherwise starts the schedule for a new run.
pub(crate) fn resume(
    dist: &Dist,
    resume: bool,
    ckpt: &mut Checkpointer,
    vs: &mut VarStore,
    opt: &mut Optimizer,
    parts: Parts,
    log: &Path,
) -> Result<Start> {
    let latest = if resume { ckpt.latest(dist)? } else { None };
    let Some(c) = latest else {
        // torch's scheduler constructor: LinearLR and OneCycleLR set the first step's rate.
        parts.schedule.start(opt)?;
        return Ok(Start::default());
    };
    let at = ckpt.restore(&c, dist, vs, opt)?;
    dist.println(format!(
        "resuming from {} (epoch {}, {} batches done, step {})",
        at.dir.display(),
        at.epoch + 1,
        at.batches_done,
        at.global_step
    ));
    parts.schedule.restore(&at.scheduler, &at.dir, opt)?;
    if let (Some(s), Some(state)) = (parts.scaler, &at.grad_scaler) {
        s.borrow_mut().load_state(state);
    }
    if let (Some(e), Some(saved)) = (parts.early.as_mut(), at.parts.get(EARLY_STOPPING)) {
        e.restore(saved)?;
    }
    if let Some(ema) = parts.ema {
        match read_tensors_file(&c, EMA_FILE)? {
            Some(saved) => ema.load(&saved)?,
            None => {
                // A checkpoint of a run without an EMA: the average starts here.
                *ema = ModelEma::new(vs, ema.decay())?;
                dist.println(
                    "the checkpoint holds no EMA weights: the average starts from its weights",
                );
            }
        }
    }
    let history = if log.exists() {
        read_records(log)?.into_iter().filter(|r| r.epoch < at.epoch).collect()
    } else {
        Vec::new()
    };
    Ok(Start {
        epoch: at.epoch,
        skip: at.batches_done as usize,
        metrics: at.epoch_metrics,
        resumed_from: Some((at.dir.clone(), at.epoch, at.batches_done)),
        history,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fit::EarlyStopping;
    use crate::train::Monitor;

    #[test]
    fn early_stoppings_state_is_keyed_in_the_parts() {
        assert!(parts_state(&None).is_null());
        let mut e = EarlyStopping::new(Monitor::ValLoss, 2);
        e.update(1.0);
        e.update(2.0);
        let saved = parts_state(&Some(e.clone()));
        let mut back = EarlyStopping::new(Monitor::ValLoss, 2);
        back.restore(&saved[EARLY_STOPPING]).unwrap();
        assert_eq!((back.best(), back.wait()), (e.best(), e.wait()));
    }
}
