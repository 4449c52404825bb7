//! One epoch of the run: the backbone frozen or not, the training steps (with their events:
//! checkpoints, stop requests, mid-epoch validation, step logs), validation, the schedule, the
//! callbacks' verdicts, the epoch's checkpoints, and how the epoch ended.
use std::path::PathBuf;

use tch::nn::VarStore;

use crate::data::{DataLoader, Dataset};
use crate::fit::callbacks::control;
use crate::fit::callbacks::launcher_report as report;
use crate::fit::parts::freeze::freeze_for_epoch;
use crate::train::{
    evaluate_step, named_anomaly, train_epoch_step, Ddp, EpochRecord, Optimizer, Precision,
    RunningMetrics, StepLogging, Validation,
};
use crate::{Error, Result};

use super::step_events::{train_state, MidValidation, StepEvents};
use super::{EpochEnd, Model, Run};

impl Run<'_> {
    /// One epoch: train (from batch `skip` with the sums `metrics` of a resumed epoch),
    /// validate, and tell the parts.
    pub(super) fn epoch<A: Dataset + 'static, B: Dataset + 'static>(
        &mut self,
        epoch: u64,
        (skip, metrics): (usize, RunningMetrics),
        model: &mut Model,
        (train, val): (&mut DataLoader<A>, &mut DataLoader<B>),
    ) -> Result<EpochEnd> {
        let (vs, step, opt) = (&*model.vs, model.step, &mut *model.opt);
        let cfg = self.cfg;
        // Freezing changed what trains: wrapped again, so the reducer covers what now trains.
        let frozen = &mut self.backbone_frozen;
        if freeze_for_epoch(cfg.freeze_backbone_epochs, epoch, vs, self.dist, frozen)? {
            self.ddp = Ddp::wrap_with(vs, self.dist, cfg.ddp.clone())?;
        }
        train.set_epoch(epoch);
        train.skip_batches(skip);
        // The steps' handle on the loss scaler (the checkpoints read it through the parts).
        let scaler = self.parts.scaler.as_ref().map(|s| s.handle());
        let opts = cfg.epoch_options(self.dist.device(), &self.ddp).start_metrics(metrics);
        let mut opts = self.tools.apply(opts);
        opts.grad_scaler = scaler.as_deref();
        if self.step_records {
            let steps_before = self.ckpt.global_step();
            opts = opts.step_records(StepLogging { epoch, steps_before });
        }
        let quiet = cfg.epoch_options(self.dist.device(), &self.ddp).progress(false);
        let mut evaluate_now = || evaluate_step(step, val, &quiet);
        let mid_val = (cfg.val_every_steps).map(|every| MidValidation {
            every,
            batches: train.len(),
            run: &mut evaluate_now,
        });
        let mut events = StepEvents {
            dist: self.dist,
            cfg,
            vs,
            epoch,
            parts: &mut self.parts,
            ckpt: &mut self.ckpt,
            watch: &mut self.watch,
            callbacks: &self.callbacks,
            stopped: &mut self.stopped,
            trail: self.trail.as_mut(),
            mid_val,
        };
        let t = match train_epoch_step(step, train, opt, &opts, &mut events) {
            Err(crate::Error::Interrupted(_)) if self.stopped.is_some() => {
                self.interrupted()?;
                return Ok(EpochEnd::Interrupted);
            }
            other => other.map_err(|e| named_anomaly(e, epoch + 1))?,
        };
        // A NaN or infinite mean (all ranks', so every rank stops here alike) means the weights
        // diverged (an epoch without samples has no mean); under float16 the loss scaler handles overflowing steps, so no check there.
        if t.samples > 0 && !t.loss.is_finite() && cfg.precision != Precision::F16 {
            self.ckpt.wait()?;
            return Err(Error::Diverged { epoch: epoch + 1, loss: t.loss });
        }
        let steps = self.ckpt.global_step();
        self.callbacks.each(|c| c.on_train_epoch_end(epoch, &t, steps))?;
        let v = evaluate_step(step, val, &opts)?;
        self.callbacks.each(|c| c.on_validation_epoch_end(epoch, &v, steps))?;
        // The average's own validation, its values in the model for the call (timm validates
        // its EMA copy the same way, beside the model).
        let v_ema = (self.parts.ema.as_ref())
            .map(|e| e.with_weights(vs, || evaluate_step(step, val, &opts)))
            .transpose()?;
        // Per-epoch schedules: the rate of the whole epoch; per-step ones: the rate after the
        // epoch's last step (both resume-independent).
        let lr_used = opt.lr();
        if let Some(s) = &self.parts.schedule {
            let monitored = cfg.monitor.map(|m| m.value(&v));
            s.after_validation(opt, Validation { loss: v.loss, accuracy: v.accuracy, monitored })?;
        }
        let acted = control::act(self.dist, &self.callbacks, (vs, opt), (epoch, steps), &v)?;
        let mut record =
            EpochRecord::from_summaries(epoch, &t, Some(&v), lr_used).with_ema(v_ema.as_ref());
        record.own_metrics.extend(acted.logged.into_iter().map(|(k, x)| (k, x.into())));
        self.history.push(record.clone());
        let stop = self.parts.early.as_mut().is_some_and(|e| e.update(e.monitor.value(&v)));
        self.after_epoch(vs, opt, epoch, &v)?;
        self.confusion = v.confusion;
        report::epoch_done(self.dist.rank(), &record, &self.ckpt);
        let steps = self.ckpt.global_step();
        self.callbacks.each(|c| c.on_epoch_end(&record, steps))?;
        match (stop, &self.parts.early, acted.stop) {
            (true, Some(e), _) => {
                self.dist.println(e.describe(epoch + 1));
                Ok(EpochEnd::StoppedEarly)
            }
            (_, _, Some(why)) => {
                self.dist.println(format!("stopping after epoch {}: {why}", epoch + 1));
                Ok(EpochEnd::StoppedEarly)
            }
            _ => Ok(EpochEnd::Continue),
        }
    }

    /// The epoch's checkpoints: `step-*` per the policy and `best/` when the monitored metric
    /// improved ([`best_monitor`]).
    fn after_epoch(
        &mut self,
        vs: &VarStore,
        opt: &Optimizer,
        epoch: u64,
        v: &crate::train::EpochSummary,
    ) -> Result<()> {
        let at = (epoch + 1, 0, RunningMetrics::default());
        let state = train_state(self.cfg, &self.parts, (vs, opt), at)?;
        let monitored = self.monitor.map(|m| m.value(v));
        let ckpt = &mut self.ckpt;
        let before = (ckpt.last_saved(), ckpt.best_metric());
        ckpt.after_epoch(self.dist, &state, epoch, monitored)?;
        let (step, best) = (ckpt.last_saved(), ckpt.best_metric());
        let best_dir = ckpt.best_dir();
        let mut saved: Vec<PathBuf> = Vec::new();
        saved.extend(step.filter(|s| Some(s) != before.0.as_ref()));
        saved.extend(best_dir.filter(|_| best != before.1));
        saved.iter().try_for_each(|dir| self.callbacks.each(|c| c.on_checkpoint_saved(dir)))
    }

    /// A stop request ended the epoch: the checkpoint of the last step is complete (no write
    /// left in flight: the process may be about to end) before the run says where it is.
    fn interrupted(&mut self) -> Result<()> {
        self.ckpt.wait()?;
        if let Some(s) = self.stopped.as_mut() {
            s.announce(self.dist, self.watch.stop_file(), self.cfg.requeue);
        }
        Ok(())
    }
}
