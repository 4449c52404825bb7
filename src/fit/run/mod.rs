//! The training run behind [`Trainer::fit`](crate::fit::Trainer::fit), laid out by its moments:
//! the set-up ([`setup`]: the loaders' settings, process switches, the weight trail, the
//! callbacks told where it starts), the resume ([`resume`]), the steps (their events in
//! [`step_events`], the CUDA graph and profiler in [`step_tools`], `max_steps` in
//! [`max_steps`]), each epoch ([`epoch`]) and the end ([`end`]). This file holds the run's state
//! and its loop over the epochs; the parts it tells (the LR schedule, checkpoints, early
//! stopping, the callbacks with the step logs, launcher reports) live in their own modules.
mod end;
mod epoch;
mod max_steps;
pub(crate) mod resume;
mod setup;
mod step_events;
pub(crate) mod step_tools;

use std::path::PathBuf;

use tch::nn::VarStore;

use crate::checkpoint::Checkpointer;
use crate::data::{DataLoader, Dataset};
use crate::dist::Dist;
use crate::fit::callbacks::metrics_log::METRICS_LOG;
use crate::fit::callbacks::Callbacks;
use crate::fit::config::FitConfig;
use crate::fit::outcome::FitReport;
use crate::fit::parts::{PartsPlan, RunParts};
use crate::fit::stop::interrupt::{Interruption, StopWatch};
use crate::models::to_channels_last;
use crate::trail::TrailRecorder;
use crate::train::{task_of, ConfusionMatrix, Ddp, EpochRecord, Monitor, Optimizer, TrainStep};
use crate::Result;
use end::{best_monitor, best_policy, restore_best, write_outputs};
use resume::{resume, resume_parts, Start};
use setup::{start_trail, LoaderSettings, RunSwitches};
use step_tools::StepTools;

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
        watch: StopWatch::start(dist, &cfg.out, cfg.max_time),
        stopped: None,
        callbacks: setup::run_callbacks(cfg),
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
        let mut model = Model { vs: &mut *vs, step, opt: &mut *opt };
        let end = run.epoch(epoch, start, &mut model, (train, val))?;
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
