//! The training run behind [`Trainer::fit`](crate::fit::Trainer::fit), as a loop over parts that
//! each live in their own module: the resume ([`resume`](crate::fit::resume)), the LR schedule
//! ([`run_schedule`](crate::fit::parts::run_schedule)), checkpoints ([`Checkpointer`]), interruption
//! ([`interrupt`](crate::fit::stop::interrupt)), early stopping, the callbacks with the step logs
//! ([`callback`](crate::fit::callbacks), `steps.csv`, TensorBoard), launcher reports
//! ([`report`](crate::fit::callbacks::launcher_report)) and the run's end ([`finish`](crate::fit::finish)). The loop itself
//! only trains, validates, and tells the parts.
use std::cell::RefCell;
use std::path::PathBuf;

use tch::nn::{ModuleT, VarStore};

use crate::checkpoint::{Checkpointer, TrainState};
use crate::data::{DataLoader, Dataset};
use crate::dist::Dist;
use crate::fit::callbacks::epoch_line::epoch_line;
use crate::fit::callbacks::launcher_report as report;
use crate::fit::callbacks::{Callbacks, FitStart};
use crate::fit::config::FitConfig;
use crate::fit::finish::{best_monitor, best_policy, best_val_acc, restore_best, write_outputs};
use crate::fit::outcome::FitReport;
use crate::fit::parts::early_stopping::EarlyStopping;
use crate::fit::parts::run_schedule::RunSchedule;
use crate::fit::resume::{resume, resume_parts, Start};
use crate::fit::stop::interrupt::{Interruption, StopWatch};
use crate::models::to_channels_last;
use crate::stateful::Stateful;
use crate::train::{
    append_record, evaluate, task_of, train_epoch, ConfusionMatrix, Ddp, EpochOptions, EpochRecord,
    GradScaler, ModelEma, Monitor, Optimizer, Precision, RunningMetrics, StepInfo, StepLogging,
    StepRecord, Task, Validation,
};
use crate::Result;
use crate::WithPath;

/// The model's variables and forward pass, and the optimizer over them.
pub(crate) struct Model<'a> {
    pub vs: &'a mut VarStore,
    pub net: &'a dyn ModuleT,
    pub opt: &'a mut Optimizer,
}

/// How an epoch ended.
enum EpochEnd {
    Continue,
    /// Early stopping ended the run after this epoch.
    StoppedEarly,
    /// A stop request ended it in the middle (`Run::stopped` says where).
    Interrupted,
}

/// A run in progress: its settings and parts.
struct Run<'a> {
    dist: &'a Dist,
    cfg: &'a FitConfig,
    /// The metric `best/` is kept by (`None` without `best/`).
    monitor: Option<Monitor>,
    ddp: Ddp<'a>,
    schedule: RunSchedule,
    scaler: Option<RefCell<GradScaler>>,
    early: Option<EarlyStopping>,
    ema: Option<RefCell<ModelEma>>,
    /// Whether the backbone is frozen now, once `freeze_backbone_epochs` has set it.
    backbone_frozen: Option<bool>,
    ckpt: RefCell<Checkpointer>,
    watch: RefCell<StopWatch>,
    stopped: RefCell<Option<Interruption>>,
    callbacks: Callbacks,
    log: PathBuf,
    history: Vec<EpochRecord>,
    confusion: Option<ConfusionMatrix>,
    resumed_from: Option<(PathBuf, u64, u64)>,
}

pub(crate) fn run<A: Dataset + 'static, B: Dataset + 'static>(
    dist: &Dist,
    cfg: &FitConfig,
    model: Model,
    train: &mut DataLoader<A>,
    val: &mut DataLoader<B>,
) -> Result<FitReport> {
    let Model { vs, net, opt } = model;
    let mut schedule = RunSchedule::new(cfg.schedule.as_deref(), opt.group_lrs().len())?;
    if let Some(c) = &cfg.clip_grad {
        c.validate()?;
    }
    let mut early = cfg.early_stopping.clone();
    if let Some(e) = &mut early {
        e.validate()?;
        e.monitor = cfg.monitor.unwrap_or(e.monitor);
    }
    if cfg.channels_last {
        to_channels_last(vs);
    }
    let ddp = Ddp::wrap_with(vs, dist, cfg.ddp.clone())?;
    let log = cfg.out.join("metrics.jsonl");
    let monitor = best_monitor(cfg, task_of(&cfg.loss, train.dataset()));
    let policy = best_policy(cfg, monitor);
    // Checkpoints are written in the background: a save costs the step a copy to host memory.
    let mut ckpt = Checkpointer::new(cfg.out.join("checkpoints"), policy.clone()).background(true);
    let start = resume(dist, cfg.resume, &mut ckpt, (vs, opt), &log)?;
    // float16 needs loss scaling; bfloat16 has float32's range and does not.
    let mut scaler = (cfg.precision == Precision::F16).then(|| GradScaler::new(dist.device()));
    // The average starts from the weights every rank now holds (rank 0's, broadcast, or the
    // checkpoint's when it holds no average).
    let mut ema = cfg.ema.map(|decay| ModelEma::new(vs, decay)).transpose()?;
    // The run's parts, by their keys in the checkpoints: restored here in one loop, saved
    // with every checkpoint (`Run::part_states`). A new part adds itself to both lists.
    let mut parts: Vec<&mut dyn Stateful> = Vec::new();
    parts.extend(schedule.configured().then_some(&mut schedule as &mut dyn Stateful));
    parts.extend(scaler.as_mut().map(|s| s as &mut dyn Stateful));
    parts.extend(early.as_mut().map(|e| e as &mut dyn Stateful));
    parts.extend(ema.as_mut().map(|e| e as &mut dyn Stateful));
    resume_parts(dist, start.checkpoint.as_ref(), &mut parts)?;
    // torch's scheduler constructor: LinearLR and OneCycleLR set the first step's rate.
    schedule.ensure_started(opt)?;
    let Start { epoch: first_epoch, skip, metrics, resumed_from, history, .. } = start;
    let mut run = Run {
        dist,
        cfg,
        monitor,
        ddp,
        schedule,
        scaler: scaler.map(RefCell::new),
        early,
        ema: ema.map(RefCell::new),
        backbone_frozen: None,
        ckpt: RefCell::new(ckpt),
        watch: RefCell::new(StopWatch::start(dist, &cfg.out)),
        stopped: RefCell::new(None),
        callbacks: Callbacks::for_run(cfg.step_log, &cfg.callbacks),
        log,
        history,
        confusion: None,
        resumed_from,
    };
    if let Some(done) = run.finished_already(first_epoch) {
        return Ok(done);
    }
    run.begin(first_epoch)?;
    let (mut skip, mut metrics) = (skip, metrics);
    let mut early_stopped = None;
    for epoch in first_epoch..cfg.epochs {
        let start = (std::mem::take(&mut skip), std::mem::take(&mut metrics));
        match run.epoch(epoch, start, vs, net, opt, train, val)? {
            EpochEnd::Continue => {}
            EpochEnd::StoppedEarly => {
                early_stopped = Some(epoch);
                break;
            }
            EpochEnd::Interrupted => return run.end(None),
        }
    }
    // The last checkpoint is complete (or its error reported) before the run says it is done.
    run.ckpt.borrow_mut().wait()?;
    run.watch.borrow_mut().finish(dist)?;
    if cfg.restore_best && !run.history.is_empty() {
        restore_best(dist, vs, &run.ckpt.borrow())?;
    }
    let names = val.dataset().classes();
    let ema = run.ema.as_ref().map(|e| e.borrow());
    let model = (&*vs, ema.as_deref());
    write_outputs(dist, cfg, model, &run.history, run.confusion.as_ref(), &names)?;
    drop(ema);
    run.end(early_stopped)
}

impl Run<'_> {
    /// A resumed run with nothing left to train (all epochs done, or stopped early): says so
    /// and reports, leaving the finished run's files as they are.
    fn finished_already(&self, first_epoch: u64) -> Option<FitReport> {
        let stopped_early = self.early.as_ref().is_some_and(|e| e.stopped());
        if self.resumed_from.is_none() || (first_epoch < self.cfg.epochs && !stopped_early) {
            return None;
        }
        self.dist.println(crate::fit::finish::nothing_to_train(
            self.cfg,
            first_epoch,
            stopped_early,
        ));
        let early_stopped = stopped_early.then(|| first_epoch.saturating_sub(1));
        let outcome = self.report(None, early_stopped);
        report::run_done(self.dist.rank(), &self.cfg.out, &outcome, &self.ckpt.borrow());
        Some(outcome)
    }

    /// The metrics log holds the epochs before `first_epoch` (rank 0), and the callbacks
    /// learn where the run starts.
    fn begin(&mut self, first_epoch: u64) -> Result<()> {
        if self.dist.is_main() {
            std::fs::create_dir_all(&self.cfg.out).with_path(&self.cfg.out)?;
            let _ = std::fs::remove_file(&self.log);
            self.history.iter().try_for_each(|r| append_record(&self.log, r))?;
        }
        let start = FitStart {
            rank: self.dist.rank(),
            world_size: self.dist.world_size(),
            out: &self.cfg.out,
            first_epoch,
            steps_done: self.ckpt.borrow().global_step(),
            resumed: self.resumed_from.is_some(),
        };
        self.callbacks.each(|c| c.on_fit_start(&start))
    }

    /// The report of the run so far (the same on every rank).
    fn report(&self, interrupted: Option<Interruption>, early_stopped: Option<u64>) -> FitReport {
        FitReport {
            history: self.history.clone(),
            confusion: self.confusion.clone(),
            best_val_acc: best_val_acc(self.monitor, &self.ckpt.borrow(), &self.history),
            best: self.monitor.zip(self.ckpt.borrow().best_metric()),
            resumed_from: self.resumed_from.clone(),
            interrupted,
            early_stopped,
        }
    }

    /// The run's end: its report to the launcher and the callbacks.
    fn end(&self, early_stopped: Option<u64>) -> Result<FitReport> {
        let outcome = self.report(self.stopped.borrow_mut().take(), early_stopped);
        report::run_done(self.dist.rank(), &self.cfg.out, &outcome, &self.ckpt.borrow());
        self.callbacks.each(|c| c.on_fit_end(&outcome))?;
        Ok(outcome)
    }

    /// The run's state for a checkpoint, at `epoch` after `batches_done` batches, with every
    /// part's.
    fn state<'s>(
        &self,
        (vs, opt): (&'s VarStore, &'s Optimizer),
        at: (u64, u64, RunningMetrics),
    ) -> Result<TrainState<'s>> {
        let (epoch, batches_done, epoch_metrics) = at;
        let state = TrainState {
            epoch_metrics,
            batches_done,
            seed: self.cfg.seed,
            config: self.cfg.config.clone(),
            ..TrainState::new(vs, opt, epoch)
        };
        let scaler = self.scaler.as_ref().map(|s| s.borrow());
        let ema = self.ema.as_ref().map(|e| e.borrow());
        let mut parts: Vec<&dyn Stateful> = Vec::new();
        parts.extend(self.schedule.configured().then_some(&self.schedule as &dyn Stateful));
        parts.extend(scaler.as_deref().map(|s| s as &dyn Stateful));
        parts.extend(self.early.as_ref().map(|e| e as &dyn Stateful));
        parts.extend(ema.as_deref().map(|e| e as &dyn Stateful));
        state.with_parts(&parts)
    }

    /// After every optimizer step: the step checkpoint, then a stop request (all ranks agree;
    /// a stop writes a checkpoint of this step first).
    fn after_step(&self, vs: &VarStore, epoch: u64, info: &StepInfo) -> Result<()> {
        let batches_done = info.batches_done as u64;
        // timm's order: the average follows the optimizer step, before anything is saved.
        if let Some(e) = &self.ema {
            e.borrow_mut().update(vs);
        }
        let state = || self.state((vs, info.optimizer), (epoch, batches_done, info.metrics()));
        if let Some(dir) = self.ckpt.borrow_mut().after_step(self.dist, state)? {
            self.callbacks.each(|c| c.on_checkpoint_saved(&dir))?;
        }
        if let Some(reason) = self.watch.borrow_mut().after_step(self.dist)? {
            let checkpoint = self.ckpt.borrow_mut().save_now(self.dist, state)?;
            let at = format!("epoch {}, {batches_done} batches done", epoch + 1);
            *self.stopped.borrow_mut() =
                Some(Interruption { epoch, batches_done, checkpoint, reason, requeued: false });
            return Err(crate::Error::Interrupted(at));
        }
        Ok(())
    }

    /// One epoch: train (from batch `skip` with the sums `metrics` of a resumed epoch),
    /// validate, and tell the parts.
    #[allow(clippy::too_many_arguments)]
    fn epoch<A: Dataset + 'static, B: Dataset + 'static>(
        &mut self,
        epoch: u64,
        (skip, metrics): (usize, RunningMetrics),
        vs: &VarStore,
        net: &dyn ModuleT,
        opt: &mut Optimizer,
        train: &mut DataLoader<A>,
        val: &mut DataLoader<B>,
    ) -> Result<EpochEnd> {
        let cfg = self.cfg;
        self.freeze_for(epoch, vs)?;
        train.set_epoch(epoch);
        train.skip_batches(skip);
        let this = &*self;
        let on_step = |info: &StepInfo| this.after_step(vs, epoch, info);
        let advance = |opt: &mut Optimizer| this.schedule.advance_step(opt);
        let on_read = |steps: &[StepRecord]| this.callbacks.each(|c| c.on_train_steps(steps));
        let mut opts = EpochOptions::on(self.dist.device())
            .hooks(&this.ddp)
            .on_step(&on_step)
            .start_metrics(metrics)
            .accumulate(cfg.accumulate)
            .precision(cfg.precision)
            .channels_last(cfg.channels_last);
        opts.progress = cfg.progress;
        opts.top_k = cfg.top_k;
        if this.schedule.per_step() {
            opts = opts.lr_after_step(&advance);
        }
        if let Some(s) = &this.scaler {
            opts = opts.grad_scaler(s);
        }
        if let Some(c) = cfg.clip_grad {
            opts = opts.clip_grad(c);
        }
        if !this.callbacks.is_empty() {
            let steps_before = this.ckpt.borrow().global_step();
            opts = opts.step_records(StepLogging { epoch, steps_before, on_read: &on_read });
        }
        let t = match train_epoch(net, train, opt, &cfg.loss, &opts) {
            Err(crate::Error::Interrupted(_)) if this.stopped.borrow().is_some() => {
                this.interrupted()?;
                return Ok(EpochEnd::Interrupted);
            }
            other => other?,
        };
        let steps = || this.ckpt.borrow().global_step();
        this.callbacks.each(|c| c.on_train_epoch_end(epoch, &t, steps()))?;
        let v = evaluate(net, val, &cfg.loss, &opts)?;
        this.callbacks.each(|c| c.on_validation_epoch_end(epoch, &v, steps()))?;
        // The average's own validation, its values in the model for the call (timm validates
        // its EMA copy the same way, beside the model).
        let v_ema = match &this.ema {
            Some(e) => Some(e.borrow().with_weights(vs, || evaluate(net, val, &cfg.loss, &opts))?),
            None => None,
        };
        // Per-epoch schedules: the rate of the whole epoch; per-step ones: the rate after the
        // epoch's last step (both resume-independent).
        let lr_used = opt.lr();
        self.schedule.after_validation(opt, Validation { loss: v.loss, accuracy: v.accuracy })?;
        let mut record = EpochRecord::from_summaries(epoch, &t, Some(&v), lr_used);
        let ema_acc =
            |e: &crate::train::EpochSummary| (e.task != Task::Regression).then_some(e.accuracy);
        (record.ema_val_loss, record.ema_val_acc) =
            (v_ema.as_ref().map(|e| e.loss), v_ema.as_ref().and_then(ema_acc));
        self.dist.println(epoch_line(cfg.epochs, &record, t.seconds));
        if self.dist.is_main() {
            append_record(&self.log, &record)?;
        }
        self.history.push(record.clone());
        let stop = self.early.as_mut().is_some_and(|e| e.update(e.monitor.value(&v)));
        self.after_epoch(vs, opt, epoch, &v)?;
        self.confusion = v.confusion;
        report::epoch_done(self.dist.rank(), &record, &self.ckpt.borrow());
        let steps = self.ckpt.borrow().global_step();
        self.callbacks.each(|c| c.on_epoch_end(&record, steps))?;
        match (stop, &self.early) {
            (true, Some(e)) => {
                self.dist.println(e.describe(epoch + 1));
                Ok(EpochEnd::StoppedEarly)
            }
            _ => Ok(EpochEnd::Continue),
        }
    }

    /// The epoch's checkpoints: `step-*` per the policy and `best/` when the monitored metric
    /// improved ([`best_monitor`]).
    fn after_epoch(
        &self,
        vs: &VarStore,
        opt: &Optimizer,
        epoch: u64,
        v: &crate::train::EpochSummary,
    ) -> Result<()> {
        let at = (epoch + 1, 0, RunningMetrics::default());
        let state = self.state((vs, opt), at)?;
        let monitored = self.monitor.map(|m| m.value(v));
        let mut ckpt = self.ckpt.borrow_mut();
        let before = (ckpt.last_saved(), ckpt.best_metric());
        ckpt.after_epoch(self.dist, &state, epoch, monitored)?;
        let (step, best) = (ckpt.last_saved(), ckpt.best_metric());
        let best_dir = ckpt.best_dir();
        drop(ckpt);
        let mut saved: Vec<PathBuf> = Vec::new();
        saved.extend(step.filter(|s| Some(s) != before.0.as_ref()));
        saved.extend(best_dir.filter(|_| best != before.1));
        saved.iter().try_for_each(|dir| self.callbacks.each(|c| c.on_checkpoint_saved(dir)))
    }

    /// `freeze_backbone_epochs`: when freezing changes what trains at `epoch`, the model is
    /// wrapped again, so that the reducer covers exactly the parameters that now train.
    fn freeze_for(&mut self, epoch: u64, vs: &VarStore) -> Result<()> {
        let n = self.cfg.freeze_backbone_epochs;
        if crate::fit::parts::freeze::freeze_for_epoch(
            n,
            epoch,
            vs,
            self.dist,
            &mut self.backbone_frozen,
        )? {
            self.ddp = Ddp::wrap_with(vs, self.dist, self.cfg.ddp.clone())?;
        }
        Ok(())
    }

    /// A stop request ended the epoch: the checkpoint of the last step is complete (no write
    /// left in flight: the process may be about to end) before the run says where it is.
    fn interrupted(&self) -> Result<()> {
        self.ckpt.borrow_mut().wait()?;
        if let Some(s) = self.stopped.borrow_mut().as_mut() {
            s.announce(self.dist, self.watch.borrow().stop_file(), self.cfg.requeue);
        }
        Ok(())
    }
}
