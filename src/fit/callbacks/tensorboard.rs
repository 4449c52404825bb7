//! TensorBoard event files under `OUT/tb/` (`tensorboard --logdir OUT/tb`), written by rank 0:
//! every optimizer step's loss, learning rate and (with norm clipping) gradient norm as
//! `step/loss`, `step/lr`, `step/grad_norm`, and every epoch's metrics as `epoch/train_loss`,
//! `epoch/train_acc`, `epoch/val_loss`, `epoch/val_acc`, `epoch/lr` and `epoch/img_per_s` (and
//! the task's own where it has them: `epoch/train_mae`, `epoch/val_rmse`, `epoch/val_f1`,
//! `epoch/val_top_k`, ...; a regression has no accuracy), and each mid-epoch validation as
//! `val_step/loss`, `val_step/acc` and `val_step/<metric>`, all at the run's optimizer step
//! count.
//!
//! Each run (a resumed one too) opens a new file that starts with a `SessionLog.START` at the
//! step after its checkpoint's, as torch's `SummaryWriter(purge_step=...)` does: TensorBoard
//! then drops what earlier files logged from that step on (steps the interrupted run took after
//! its last checkpoint, or an older run in the same folder), so the curves read as one run.
use std::time::{SystemTime, UNIX_EPOCH};

use crate::fit::callbacks::event_file::{Event, EventFile, SessionLog, What, SESSION_START};
use crate::fit::callbacks::{Callback, FitStart};
use crate::train::{EpochRecord, EpochSummary, StepRecord};
use crate::Result;

/// The TensorBoard logger (a [`Callback`]; the `Trainer` adds it unless the step log is off).
#[derive(Default)]
pub(crate) struct TensorBoardLog {
    file: Option<EventFile>,
}

fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

impl Callback for TensorBoardLog {
    fn on_fit_start(&mut self, start: &FitStart) -> Result<()> {
        if start.rank != 0 {
            return Ok(());
        }
        let wall_time = now();
        let mut file = EventFile::create(&start.out.join("tb"), wall_time)?;
        let purge = (start.steps_done + 1) as i64;
        let log = What::SessionLog(SessionLog { status: SESSION_START });
        file.write(&Event { wall_time, step: purge, what: Some(log) })?;
        file.flush()?;
        self.file = Some(file);
        Ok(())
    }

    fn on_train_steps(&mut self, steps: &[StepRecord]) -> Result<()> {
        let Some(file) = &mut self.file else { return Ok(()) };
        for s in steps {
            let own: Vec<(String, f64)> =
                s.metrics.iter().map(|(name, v)| (format!("step/{name}"), *v)).collect();
            let mut values = vec![("step/loss", s.loss), ("step/lr", s.lr)];
            values.extend(s.grad_norm.map(|n| ("step/grad_norm", n)));
            values.extend(own.iter().map(|(tag, v)| (tag.as_str(), *v)));
            file.scalars(s.wall_time, s.step, &values)?;
        }
        file.flush()
    }

    fn on_epoch_end(&mut self, r: &EpochRecord, steps_done: u64) -> Result<()> {
        let Some(file) = &mut self.file else { return Ok(()) };
        let mut values = vec![("epoch/train_loss", r.train_loss)];
        values.extend(Some(r.train_acc).filter(|a| !a.is_nan()).map(|a| ("epoch/train_acc", a)));
        values.extend([("epoch/lr", r.lr), ("epoch/img_per_s", r.img_per_s)]);
        let optional = [
            ("epoch/val_loss", r.val_loss),
            ("epoch/val_acc", r.val_acc),
            ("epoch/train_top_k", r.train_top_k),
            ("epoch/val_top_k", r.val_top_k),
            ("epoch/train_mae", r.train_mae),
            ("epoch/train_rmse", r.train_rmse),
            ("epoch/val_mae", r.val_mae),
            ("epoch/val_rmse", r.val_rmse),
            ("epoch/train_f1", r.train_f1),
            ("epoch/val_f1", r.val_f1),
        ];
        values.extend(optional.into_iter().filter_map(|(tag, v)| v.map(|v| (tag, v))));
        let own: Vec<(String, f64)> = (r.own_metrics.iter())
            .filter_map(|(key, v)| Some((format!("epoch/{key}"), v.as_f64()?)))
            .collect();
        values.extend(own.iter().map(|(tag, v)| (tag.as_str(), *v)));
        file.scalars(now(), steps_done, &values)?;
        file.flush()
    }

    fn on_step_validation(&mut self, _epoch: u64, steps_done: u64, v: &EpochSummary) -> Result<()> {
        let Some(file) = &mut self.file else { return Ok(()) };
        let mut values = vec![("val_step/loss".to_string(), v.loss)];
        if v.task != crate::train::Task::Regression {
            values.push(("val_step/acc".into(), v.accuracy));
        }
        values.extend(v.user_metrics.iter().map(|m| (format!("val_step/{}", m.name), m.value)));
        let values: Vec<(&str, f64)> = values.iter().map(|(t, x)| (t.as_str(), *x)).collect();
        file.scalars(now(), steps_done, &values)?;
        file.flush()
    }

    fn on_fit_end(&mut self, _report: &crate::fit::FitReport) -> Result<()> {
        match self.file.take() {
            Some(mut f) => f.flush(),
            None => Ok(()),
        }
    }
}
