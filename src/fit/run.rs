//! The training run behind [`Trainer::fit`](crate::fit::Trainer::fit), as a loop over parts that
//! each live in their own module: the resume ([`resume`](crate::fit::resume)), the LR schedule
//! ([`run_schedule`](crate::fit::parts::run_schedule)), checkpoints ([`Checkpointer`]), interruption
//! ([`interrupt`](crate::fit::stop::interrupt)), early stopping, the callbacks with the step logs
//! ([`callback`](crate::fit::callbacks), `steps.csv`, TensorBoard), launcher reports
//! ([`report`](crate::fit::callbacks::launcher_report)) and the run's end ([`finish`](crate::fit::finish)). The loop itself
//! only trains, validates, and tells the parts.
use std::path::PathBuf;

use tch::nn::VarStore;

use crate::checkpoint::Checkpointer;
use crate::data::{DataLoader, Dataset};
use crate::dist::Dist;
use crate::fit::callbacks::launcher_report as report;
use crate::fit::callbacks::metrics_log::METRICS_LOG;
use crate::fit::callbacks::{control, Callbacks, FitStart};
use crate::fit::config::FitConfig;
use crate::fit::finish::{best_monitor, best_policy, best_val_acc, restore_best, write_outputs};
use crate::fit::max_steps;
use crate::fit::outcome::FitReport;
use crate::fit::parts::freeze::freeze_for_epoch;
use crate::fit::parts::{PartsPlan, RunParts};
use crate::fit::resume::{resume, resume_parts, Start};
use crate::fit::run_loaders::LoaderSettings;
use crate::fit::step_events::{train_state, MidValidation, StepEvents};
use crate::fit::step_tools::StepTools;
use crate::fit::stop::interrupt::{Interruption, StopWatch};
use crate::fit::switches::RunSwitches;
use crate::fit::trail_start::start_trail;
use crate::models::to_channels_last;
use crate::trail::TrailRecorder;
use crate::train::{
    evaluate_step, named_anomaly, task_of, train_epoch_step, ConfusionMatrix, Ddp, EpochRecord,
    Monitor, Optimizer, Precision, RunningMetrics, StepLogging, TrainStep, Validation,
};
use crate::{Error, Result};

/// The model's variables, its training step (forward pass and loss) and the optimizer over them.
pub(crate) struct Model<'a> {
    pub vs: &'a mut VarStore,
    pub step: &'a dyn TrainStep,
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
    /// The parts every checkpoint keeps (schedule, loss scaler, early stopping, EMA).
    parts: RunParts,
    /// Whether the backbone is frozen now, once `freeze_backbone_epochs` has set it.
    backbone_frozen: Option<bool>,
    ckpt: Checkpointer,
    watch: StopWatch,
    /// Set when a stop request ended the run.
    stopped: Option<Interruption>,
    callbacks: Callbacks,
    /// Whether some callback reads step records (the step logs, or the user's).
    step_records: bool,
    history: Vec<EpochRecord>,
    confusion: Option<ConfusionMatrix>,
    resumed_from: Option<(PathBuf, u64, u64)>,
    /// The weight trail's writer (rank 0, with `FitConfig::weight_trail`).
    trail: Option<TrailRecorder>,
    /// The training step as a CUDA graph and the profiler, kept across epochs.
    tools: StepTools,
}

pub(crate) fn run<A: Dataset + 'static, B: Dataset + 'static>(
    dist: &Dist,
    cfg: &FitConfig,
    model: Model,
    train: &mut DataLoader<A>,
    val: &mut DataLoader<B>,
) -> Result<FitReport> {
    cfg.check_counts()?;
    cfg.check_metrics()?;
    let _switches = RunSwitches::apply(cfg)?;
    // The batch limits and mixing hold for this run only: the caller's loaders get theirs back.
    let own = LoaderSettings::apply(cfg, train, val)?;
    let report = run_limited(dist, cfg, model, train, val);
    own.restore(train, val);
    report
}

fn run_limited<A: Dataset + 'static, B: Dataset + 'static>(
    dist: &Dist,
    cfg: &FitConfig,
    model: Model,
    train: &mut DataLoader<A>,
    val: &mut DataLoader<B>,
) -> Result<FitReport> {
    let Model { vs, step, opt } = model;
    // The parts the settings ask for, checked before anything runs.
    let plan = PartsPlan::check(cfg, opt.group_lrs().len())?;
    if let Some(c) = &cfg.clip_grad {
        c.validate()?;
    }
    if cfg.channels_last {
        to_channels_last(vs);
    }
    let ddp = Ddp::wrap_with(vs, dist, cfg.ddp.clone())?;
    let log = cfg.out.join(METRICS_LOG);
    let monitor = best_monitor(cfg, task_of(step.task(), train.dataset()));
    let policy = best_policy(cfg, monitor);
    // Checkpoints are written in the background: a save costs the step a copy to host memory.
    let mut ckpt = Checkpointer::new(cfg.out.join("checkpoints"), policy.clone()).background(true);
    let start = resume(dist, cfg.resume, &mut ckpt, (vs, opt), &log)?;
    let mut parts = plan.build(cfg, dist, vs, train.batch_size())?;
    // Every part by its key in the checkpoint, in one loop.
    resume_parts(dist, start.checkpoint.as_ref(), &mut parts.each_mut())?;
    // On another number of ranks than the checkpoint's: the same global batch and samples.
    let layout = parts.data_layout.as_mut().expect("the data layout is always a part");
    let (start, accumulate) = layout.adjust(dist, start)?;
    let elastic_cfg = accumulate.map(|k| FitConfig { accumulate: k, ..cfg.clone() });
    let cfg = elastic_cfg.as_ref().unwrap_or(cfg);
    if let Some(s) = &parts.schedule {
        // torch's scheduler constructor: LinearLR and OneCycleLR set the first step's rate.
        s.ensure_started(opt)?;
    }
    let Start { epoch: first_epoch, skip, metrics, resumed_from, history, .. } = start;
    let mut run = Run {
        dist,
        cfg,
        monitor,
        ddp,
        parts,
        backbone_frozen: None,
        ckpt,
        watch: StopWatch::start(dist, &cfg.out),
        stopped: None,
        callbacks: Callbacks::for_run(cfg),
        step_records: cfg.step_log || !cfg.callbacks.is_empty(),
        history,
        confusion: None,
        resumed_from,
        trail: None,
        tools: StepTools::for_run(dist, cfg)?,
    };
    if let Some(done) = run.finished_already(first_epoch) {
        return Ok(done);
    }
    let resumed_steps = run.resumed_from.is_some().then(|| run.ckpt.global_step());
    run.trail = start_trail(dist, cfg, resumed_steps, (train.dataset().len(), train.batch_size()))?;
    run.begin(first_epoch)?;
    let (mut skip, mut metrics) = (skip, metrics);
    let mut early_stopped = None;
    let run_limit = train.batch_limit();
    for epoch in first_epoch..cfg.epochs {
        let start = (std::mem::take(&mut skip), std::mem::take(&mut metrics));
        train.set_limit_batches(max_steps::epoch_limit(cfg, &run.ckpt, start.0, run_limit));
        let end = run.epoch(epoch, start, (vs, step, opt), (train, val))?;
        if let (EpochEnd::Continue, Some(line)) = (&end, max_steps::end(cfg, &run.ckpt, epoch)) {
            dist.println(line);
            break;
        }
        match end {
            EpochEnd::Continue => {}
            EpochEnd::StoppedEarly => {
                early_stopped = Some(epoch);
                break;
            }
            EpochEnd::Interrupted => return run.end(None),
        }
    }
    run.tools.finish(dist)?;
    // The last checkpoint is complete (or its error reported) before the run says it is done.
    run.ckpt.wait()?;
    run.watch.finish(dist)?;
    if cfg.restore_best && !run.history.is_empty() {
        restore_best(dist, vs, &run.ckpt)?;
    }
    let names = val.dataset().classes();
    let model = (&*vs, run.parts.ema.as_ref());
    write_outputs(dist, cfg, model, &run.history, run.confusion.as_ref(), &names)?;
    run.end(early_stopped)
}

impl Run<'_> {
    /// A resumed run with nothing left to train (all epochs done, or stopped early): says so
    /// and reports, leaving the finished run's files as they are.
    fn finished_already(&self, first_epoch: u64) -> Option<FitReport> {
        let stopped_early = self.parts.early.as_ref().is_some_and(|e| e.stopped());
        let at_max = max_steps::reached(self.cfg.max_steps, self.ckpt.global_step());
        if self.resumed_from.is_none()
            || (first_epoch < self.cfg.epochs && !stopped_early && !at_max)
        {
            return None;
        }
        let (cfg, stopped) = (self.cfg, (stopped_early, at_max));
        self.dist.println(crate::fit::finish::nothing_to_train(cfg, first_epoch, stopped));
        let early_stopped = stopped_early.then(|| first_epoch.saturating_sub(1));
        let outcome = self.report(None, early_stopped);
        report::run_done(self.dist.rank(), &self.cfg.out, &outcome, &self.ckpt);
        Some(outcome)
    }

    /// The callbacks learn where the run starts (the metrics log then holds the epochs before
    /// `first_epoch`).
    fn begin(&mut self, first_epoch: u64) -> Result<()> {
        let start = FitStart {
            rank: self.dist.rank(),
            world_size: self.dist.world_size(),
            out: &self.cfg.out,
            first_epoch,
            steps_done: self.ckpt.global_step(),
            resumed: self.resumed_from.is_some(),
            epochs: self.cfg.epochs,
            history: &self.history,
        };
        self.callbacks.each(|c| c.on_fit_start(&start))
    }

    /// The report of the run so far (the same on every rank).
    fn report(&self, interrupted: Option<Interruption>, early_stopped: Option<u64>) -> FitReport {
        FitReport {
            history: self.history.clone(),
            confusion: self.confusion.clone(),
            best_val_acc: best_val_acc(self.monitor, &self.ckpt, &self.history),
            best: self.monitor.zip(self.ckpt.best_metric()),
            resumed_from: self.resumed_from.clone(),
            interrupted,
            early_stopped,
        }
    }

    /// The run's end: its report to the launcher and the callbacks.
    fn end(&mut self, early_stopped: Option<u64>) -> Result<FitReport> {
        let stopped = self.stopped.take();
        let outcome = self.report(stopped, early_stopped);
        report::run_done(self.dist.rank(), &self.cfg.out, &outcome, &self.ckpt);
        self.callbacks.each(|c| c.on_fit_end(&outcome))?;
        Ok(outcome)
    }

    /// One epoch: train (from batch `skip` with the sums `metrics` of a resumed epoch),
    /// validate, and tell the parts.
    fn epoch<A: Dataset + 'static, B: Dataset + 'static>(
        &mut self,
        epoch: u64,
        (skip, metrics): (usize, RunningMetrics),
        (vs, step, opt): (&VarStore, &dyn TrainStep, &mut Optimizer),
        (train, val): (&mut DataLoader<A>, &mut DataLoader<B>),
    ) -> Result<EpochEnd> {
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
