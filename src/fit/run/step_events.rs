//! What a run does between the optimizer steps of an epoch, as the epoch's one
//! [`StepListener`]: a per-step schedule sets the next rates, the EMA follows the step, the
//! step checkpoint is written (with every part's state), a mid-epoch validation runs when its
//! step comes, a stop request ends the epoch after its checkpoint, and the callbacks get the
//! step records. It borrows what it changes from the
//! run mutably, for the epoch's length.
use std::path::Path;

use tch::nn::VarStore;

use crate::checkpoint::{Checkpointer, TrainState};
use crate::dist::Dist;
use crate::fit::callbacks::Callbacks;
use crate::fit::config::FitConfig;
use crate::fit::parts::RunParts;
use crate::fit::stop::interrupt::{Interruption, StopWatch};
use crate::trail::TrailRecorder;
use crate::train::{
    BeforeOptimizerStep, EpochSummary, Optimizer, RunningMetrics, StepInfo, StepListener,
    StepRecord,
};
use crate::Result;

/// The run's state for a checkpoint, at `epoch` after `batches_done` batches with the epoch's
/// sums `metrics`, with every part's.
pub(crate) fn train_state<'s>(
    cfg: &FitConfig,
    parts: &RunParts,
    (vs, opt): (&'s VarStore, &'s Optimizer),
    (epoch, batches_done, metrics): (u64, u64, RunningMetrics),
) -> Result<TrainState<'s>> {
    let state = TrainState {
        epoch_metrics: metrics,
        batches_done,
        seed: cfg.seed,
        config: cfg.config.clone(),
        ..TrainState::new(vs, opt, epoch)
    };
    state.with_parts(&parts.each())
}

/// The run's side of one epoch's steps.
pub(crate) struct StepEvents<'r> {
    pub dist: &'r Dist,
    pub cfg: &'r FitConfig,
    pub vs: &'r VarStore,
    /// The epoch in progress (0-based).
    pub epoch: u64,
    pub parts: &'r mut RunParts,
    pub ckpt: &'r mut Checkpointer,
    pub watch: &'r mut StopWatch,
    pub callbacks: &'r Callbacks,
    /// Set when a stop request ended the epoch: where, why, and its checkpoint.
    pub stopped: &'r mut Option<Interruption>,
    /// The weight trail's writer (rank 0, when the run keeps one).
    pub trail: Option<&'r mut TrailRecorder>,
    /// Validation in the middle of the epoch, with `val_every_steps`.
    pub mid_val: Option<MidValidation<'r>>,
}

/// A validation after every `every` optimizer steps, but not after the step that ends the
/// epoch's `batches` batches (the epoch's own validation follows it).
pub(crate) struct MidValidation<'r> {
    pub every: u64,
    pub batches: usize,
    pub run: &'r mut dyn FnMut() -> Result<EpochSummary>,
}

impl StepListener for StepEvents<'_> {
    fn before_optimizer_step(&mut self, step: &mut BeforeOptimizerStep) -> Result<()> {
        self.callbacks.each(|c| c.on_before_optimizer_step(step))
    }

    fn lr_after_step(&mut self, optimizer: &mut Optimizer) -> Result<()> {
        match &self.parts.schedule {
            Some(s) if s.per_step() => s.advance_step(optimizer),
            _ => Ok(()),
        }
    }

    /// After every optimizer step: the step checkpoint, then a stop request (all ranks agree;
    /// a stop writes a checkpoint of this step first).
    fn on_step(&mut self, info: &StepInfo) -> Result<()> {
        let batches_done = info.batches_done as u64;
        // timm's order: the average follows the optimizer step, before anything is saved.
        if let Some(e) = &mut self.parts.ema {
            e.after_step(self.vs, self.epoch, batches_done.saturating_sub(1));
        }
        let (cfg, parts, model) = (self.cfg, &*self.parts, (self.vs, info.optimizer));
        let state = || train_state(cfg, parts, model, (self.epoch, batches_done, info.metrics()));
        if let Some(dir) = self.ckpt.after_step(self.dist, state)? {
            self.saved(&dir)?;
        }
        if let Some(trail) = &mut self.trail {
            let at = (self.ckpt.global_step(), self.epoch, batches_done);
            trail.after_step(at, self.vs, info.optimizer)?;
        }
        if let Some(m) = &mut self.mid_val {
            let step = self.ckpt.global_step();
            if step % m.every == 0 && info.batches_done < m.batches {
                let v = (m.run)()?;
                let at = format!("epoch {}, {batches_done}/{} batches", self.epoch + 1, m.batches);
                self.dist.println(format!("step {step} ({at}): val {v}"));
                self.callbacks.each(|c| c.on_step_validation(self.epoch, step, &v))?;
            }
        }
        if let Some(reason) = self.watch.after_step(self.dist)? {
            let checkpoint = self.ckpt.save_now(self.dist, state)?;
            let at = format!("epoch {}, {batches_done} batches done", self.epoch + 1);
            *self.stopped = Some(Interruption {
                epoch: self.epoch,
                batches_done,
                checkpoint,
                reason,
                requeued: false,
            });
            return Err(crate::Error::Interrupted(at));
        }
        Ok(())
    }

    fn on_steps_read(&mut self, steps: &[StepRecord]) -> Result<()> {
        self.callbacks.each(|c| c.on_train_steps(steps))
    }
}

impl StepEvents<'_> {
    fn saved(&self, dir: &Path) -> Result<()> {
        self.callbacks.each(|c| c.on_checkpoint_saved(dir))
    }
}
