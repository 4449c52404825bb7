//! The training run behind [`Trainer::fit`](super::Trainer::fit): data-parallel wrap, resume
//! from the newest intact checkpoint, epochs of train/evaluate with an optional LR schedule
//! (stepped per epoch or per optimizer step), step and epoch checkpoints (and the best model),
//! and on rank 0 the metrics log, the curves and confusion matrix, and the final weights.
use std::cell::RefCell;

use tch::nn::{ModuleT, VarStore};

use super::config::{FitConfig, FitReport};
use super::early_stopping::EarlyStopping;
use super::interrupt::{Interruption, StopWatch};
use super::report;
use crate::checkpoint::{Checkpointer, Policy, TrainState};
use crate::data::{readable_class_name, DataLoader, Dataset};
use crate::dist::{Ddp, Dist};
use crate::models::{load_safetensors, save_safetensors, to_channels_last};
use crate::notebook::{confusion_matrix_plot, loss_accuracy_curves};
use crate::train::{
    append_record, data_wait_note, evaluate, read_records, train_epoch, Cadence, EpochOptions,
    EpochRecord, GradScaler, LrSchedule, Mode, Monitor, Optimizer, Precision, RunningMetrics,
    StepInfo, Validation,
};
use crate::Result;
use crate::WithPath;

/// The model's variables and forward pass, and the optimizer over them.
pub(crate) struct Model<'a> {
    pub vs: &'a mut VarStore,
    pub net: &'a dyn ModuleT,
    pub opt: &'a mut Optimizer,
}

pub(crate) fn run<A: Dataset + 'static, B: Dataset + 'static>(
    dist: &Dist,
    cfg: &FitConfig,
    model: Model,
    train: &mut DataLoader<A>,
    val: &mut DataLoader<B>,
) -> Result<FitReport> {
    let Model { vs, net, opt } = model;
    if let Some(s) = &cfg.schedule {
        s.validate()?;
    }
    if let Some(c) = &cfg.clip_grad {
        c.validate()?;
    }
    // `best/` judged by FitConfig::monitor when one is set.
    let policy = best_policy(cfg);
    let best_by = policy.best.map(Monitor::of_mode);
    let mut early = cfg.early_stopping.clone();
    if let Some(e) = &mut early {
        e.validate()?;
        e.monitor = cfg.monitor.unwrap_or(e.monitor);
    }
    let loss_fn = &cfg.loss;
    if cfg.channels_last {
        to_channels_last(vs);
    }
    let ddp = Ddp::wrap_with(vs, dist, cfg.ddp.clone())?;
    let log = cfg.out.join("metrics.jsonl");
    let schedule: Option<RefCell<Box<dyn LrSchedule>>> = cfg.schedule.clone().map(RefCell::new);
    // Checkpoints are written in the background: a save costs the step a copy to host memory.
    let mut ckpt = Checkpointer::new(cfg.out.join("checkpoints"), policy.clone()).background(true);
    let (mut start_epoch, mut skip, mut start_metrics, mut resumed_from) =
        (0, 0, RunningMetrics::default(), None);
    // float16 needs loss scaling; bfloat16 has float32's range and does not.
    let scaler =
        (cfg.precision == Precision::F16).then(|| RefCell::new(GradScaler::new(dist.device())));
    let mut history = Vec::new();
    if cfg.resume {
        if let Some(c) = ckpt.latest(dist)? {
            let at = ckpt.restore(&c, dist, vs, opt)?;
            dist.println(format!(
                "resuming from {} (epoch {}, {} batches done, step {})",
                at.dir.display(),
                at.epoch + 1,
                at.batches_done,
                at.global_step
            ));
            if let Some(s) = &schedule {
                let mut s = s.borrow_mut();
                if at.scheduler.is_null() {
                    // A checkpoint of a run without a schedule: this one starts here.
                    opt.set_lr(s.start(opt.lr())?);
                } else {
                    s.load_state(&at.scheduler).map_err(|e| {
                        crate::Error::Checkpoint(format!(
                            "scheduler state in {}: {e}",
                            at.dir.display()
                        ))
                    })?;
                }
            }
            (start_epoch, skip, start_metrics) =
                (at.epoch, at.batches_done as usize, at.epoch_metrics);
            if let (Some(s), Some(state)) = (&scaler, &at.grad_scaler) {
                s.borrow_mut().load_state(state);
            }
            if let (Some(e), Some(saved)) = (&mut early, at.parts.get(EARLY_STOPPING)) {
                e.restore(saved)?;
            }
            resumed_from = Some((at.dir.clone(), at.epoch, at.batches_done));
            if log.exists() {
                history =
                    read_records(&log)?.into_iter().filter(|r| r.epoch < start_epoch).collect();
            }
        }
    }
    if let (Some(s), None) = (&schedule, &resumed_from) {
        // torch's scheduler constructor: LinearLR and OneCycleLR set the first step's rate.
        opt.set_lr(s.borrow_mut().start(opt.lr())?);
    }
    let stopped_early = early.as_ref().is_some_and(|e| e.stopped());
    if (start_epoch >= cfg.epochs || stopped_early) && resumed_from.is_some() {
        // Nothing to train: say so, and leave the finished run's files as they are.
        let why = if stopped_early {
            format!("early stopping ended it after {start_epoch} epochs")
        } else {
            format!("{start_epoch} of {} epochs done", cfg.epochs)
        };
        dist.println(format!(
            "{} holds a finished run ({why}): nothing to train. To train again, start over without resuming \
             (Trainer::resume(false); --no-resume in the examples), choose another output folder (--out), or ask for more epochs (--epochs).",
            cfg.out.display(),
        ));
        let best_val_acc = best_val_acc(&policy, &ckpt, &history);
        let early_stopped =
            early.as_ref().filter(|e| e.stopped()).map(|_| start_epoch.saturating_sub(1));
        let outcome = FitReport {
            history,
            confusion: None,
            best_val_acc,
            resumed_from,
            interrupted: None,
            early_stopped,
        };
        report::run_done(dist.rank(), &cfg.out, &outcome, &ckpt);
        return Ok(outcome);
    }
    if dist.is_main() {
        std::fs::create_dir_all(&cfg.out).with_path(&cfg.out)?;
        let _ = std::fs::remove_file(&log);
        history.iter().try_for_each(|r| append_record(&log, r))?;
    }
    let scheduler_json =
        || schedule.as_ref().map_or(serde_json::Value::Null, |s| s.borrow().state());
    let cadence = schedule.as_ref().map(|s| s.borrow().cadence());
    // A per-step schedule advances after every optimizer step, before the step's checkpoint.
    let advance_step = |lr: f64| -> Result<f64> {
        match &schedule {
            Some(s) => s.borrow_mut().advance(lr, None),
            None => Ok(lr),
        }
    };
    let ckpt = RefCell::new(ckpt);
    let watch = RefCell::new(StopWatch::start(dist, &cfg.out));
    let stopped: RefCell<Option<Interruption>> = RefCell::new(None);
    let scaler_state = || scaler.as_ref().map(|s| s.borrow().state());
    let mut confusion = None;
    let mut early_stopped = None;
    for epoch in start_epoch..cfg.epochs {
        // The parts' states as of this epoch's start, for its step checkpoints.
        let parts = parts_state(&early);
        train.set_epoch(epoch);
        train.skip_batches(std::mem::take(&mut skip));
        let on_step = |info: &StepInfo| -> Result<()> {
            let state = || TrainState {
                vs,
                optimizer: info.optimizer,
                scheduler: scheduler_json(),
                epoch,
                batches_done: info.batches_done as u64,
                epoch_metrics: info.metrics(),
                seed: cfg.seed,
                config: cfg.config.clone(),
                grad_scaler: scaler_state(),
                parts: parts.clone(),
            };
            ckpt.borrow_mut().after_step(dist, state)?;
            if let Some(reason) = watch.borrow_mut().after_step(dist)? {
                let checkpoint = ckpt.borrow_mut().save_now(dist, state)?;
                let batches_done = info.batches_done as u64;
                let at = format!("epoch {}, {batches_done} batches done", epoch + 1);
                *stopped.borrow_mut() =
                    Some(Interruption { epoch, batches_done, checkpoint, reason, requeued: false });
                return Err(crate::Error::Interrupted(at));
            }
            Ok(())
        };
        let mut opts = EpochOptions::on(dist.device())
            .hooks(&ddp)
            .on_step(&on_step)
            .start_metrics(std::mem::take(&mut start_metrics))
            .accumulate(cfg.accumulate);
        if cadence == Some(Cadence::Step) {
            opts = opts.lr_after_step(&advance_step);
        }
        opts.progress = cfg.progress;
        opts = opts.precision(cfg.precision).channels_last(cfg.channels_last);
        if let Some(s) = &scaler {
            opts = opts.grad_scaler(s);
        }
        if let Some(c) = cfg.clip_grad {
            opts = opts.clip_grad(c);
        }
        let t = match train_epoch(net, train, opt, loss_fn, &opts) {
            Err(crate::Error::Interrupted(_)) if stopped.borrow().is_some() => {
                // The checkpoint of the last step is complete (no write left in flight: the
                // process may be about to end) before the run says where it is.
                ckpt.borrow_mut().wait()?;
                let mut stop = stopped.borrow_mut().take();
                if let Some(s) = &mut stop {
                    if dist.is_main() {
                        let _ = std::fs::remove_file(watch.borrow().stop_file());
                    }
                    dist.println(format!(
                        "interrupted ({}) in epoch {} after {} batches: checkpoint {}; run \
                         again with resume on to continue from it",
                        s.reason,
                        s.epoch + 1,
                        s.batches_done,
                        s.checkpoint.display()
                    ));
                    // Last: requeueing ends this Slurm job at once.
                    s.requeued = cfg.requeue && super::requeue::requeue_after(dist, &s.reason);
                }
                let best_val_acc = best_val_acc(&policy, &ckpt.borrow(), &history);
                let outcome = FitReport {
                    history,
                    confusion,
                    best_val_acc,
                    resumed_from,
                    interrupted: stop,
                    early_stopped: None,
                };
                report::run_done(dist.rank(), &cfg.out, &outcome, &ckpt.borrow());
                return Ok(outcome);
            }
            other => other?,
        };
        let v = evaluate(net, val, loss_fn, &opts)?;
        // Per-epoch schedules: the rate of the whole epoch; per-step ones: the rate after the
        // epoch's last step (both resume-independent).
        let lr_used = opt.lr();
        if let (Some(s), Some(Cadence::Epoch)) = (&schedule, cadence) {
            let validation = Validation { loss: v.loss, accuracy: v.accuracy };
            opt.set_lr(s.borrow_mut().advance(opt.lr(), Some(validation))?);
        }
        let wait = data_wait_note(&t.data_wait_s, t.seconds);
        let norm = t.grad_norm.map_or(String::new(), |n| format!("grad norm {n:.3} | "));
        dist.println(format!("epoch {}/{}: train loss {:.4} acc {:.2}% | val loss {:.4} acc {:.2}% | lr {lr_used:.2e} | {norm}{:.1} img/s | {wait}", epoch + 1, cfg.epochs, t.loss, t.accuracy * 100.0, v.loss, v.accuracy * 100.0, t.img_per_s));
        let record = EpochRecord::from_summaries(epoch, &t, Some(&v), lr_used);
        if dist.is_main() {
            append_record(&log, &record)?;
        }
        history.push(record);
        confusion = v.confusion;
        let stop = early.as_mut().is_some_and(|e| e.update(e.monitor.value(v.loss, v.accuracy)));
        let state = TrainState {
            vs,
            optimizer: opt,
            scheduler: scheduler_json(),
            epoch: epoch + 1,
            batches_done: 0,
            epoch_metrics: RunningMetrics::default(),
            seed: cfg.seed,
            config: cfg.config.clone(),
            grad_scaler: scaler_state(),
            parts: parts_state(&early),
        };
        // `best/` is judged by the metric its mode is for: the loss (Min) or the accuracy (Max).
        let monitored = best_by.map(|m| m.value(v.loss, v.accuracy));
        ckpt.borrow_mut().after_epoch(dist, &state, epoch, monitored)?;
        if let Some(done) = history.last() {
            report::epoch_done(dist.rank(), done, &ckpt.borrow());
        }
        if let (true, Some(e)) = (stop, &early) {
            dist.println(e.describe(epoch + 1));
            early_stopped = Some(epoch);
            break;
        }
    }
    // The last checkpoint is complete (or its error reported) before the run says it is done.
    ckpt.borrow_mut().wait()?;
    watch.borrow_mut().finish(dist)?;
    if cfg.restore_best && !history.is_empty() {
        restore_best(dist, vs, &ckpt.borrow())?;
    }
    if dist.is_main() && !history.is_empty() {
        loss_accuracy_curves(&history)?.save(cfg.out.join("curves.png"))?;
        // A data set without class names (a bare TensorDataset) has no confusion matrix.
        if let Some(cm) = confusion.as_ref().filter(|cm| cm.classes() > 0) {
            save_confusion_plot(dist, cm, &val.dataset().classes(), &cfg.out)?;
        }
        save_safetensors(vs, &cfg.out.join("model.safetensors"))?;
    }
    let best_val_acc = best_val_acc(&policy, &ckpt.borrow(), &history);
    let outcome = FitReport {
        history,
        confusion,
        best_val_acc,
        resumed_from,
        interrupted: None,
        early_stopped,
    };
    report::run_done(dist.rank(), &cfg.out, &outcome, &ckpt.borrow());
    Ok(outcome)
}

/// The checkpoint policy with `best/` judged by [`FitConfig::monitor`] when one is set.
fn best_policy(cfg: &FitConfig) -> Policy {
    let mut policy = cfg.policy.clone();
    if let (Some(m), Some(_)) = (cfg.monitor, policy.best) {
        policy.best = Some(m.mode());
    }
    policy
}

/// `Trainer::restore_best`: every rank loads `best/`'s weights (checksums verified), so the
/// model the run returns and its `model.safetensors` are the best epoch's.
fn restore_best(dist: &Dist, vs: &mut VarStore, ckpt: &Checkpointer) -> Result<()> {
    match ckpt.best_dir() {
        Some(dir) => {
            let best = crate::checkpoint::open_checkpoint(&dir)?; // sizes and CRC32s checked
            load_safetensors(vs, &best.dir.join(crate::checkpoint::MODEL_FILE), true)?;
            dist.println(format!("restored the best epoch's weights from {}", dir.display()));
        }
        None => dist.println(
            "restore_best: no best/ checkpoint (keep_best is off, or no epoch ended): the last \
             epoch's weights stay",
        ),
    }
    Ok(())
}

/// The key of early stopping's state in a checkpoint's parts.
const EARLY_STOPPING: &str = "early_stopping";

/// The states of the run's parts for a checkpoint (`Value::Null` when it has none).
fn parts_state(early: &Option<EarlyStopping>) -> serde_json::Value {
    match early {
        Some(e) => serde_json::json!({ EARLY_STOPPING: e }),
        None => serde_json::Value::Null,
    }
}

/// [`FitReport::best_val_acc`]: the metric `best/` was kept by when that is the accuracy (the
/// default, [`Mode::Max`]; `None` without `best/`); with `best/` kept by the loss
/// ([`Mode::Min`]), the highest validation accuracy of the epochs run.
fn best_val_acc(policy: &Policy, ckpt: &Checkpointer, history: &[EpochRecord]) -> Option<f64> {
    match policy.best {
        Some(Mode::Min) => history.iter().filter_map(|r| r.val_acc).reduce(f64::max),
        _ => ckpt.best_metric(),
    }
}

/// The most classes a confusion.png shows (a 40x40 grid of counts is still readable).
const PLOTTED_CLASSES: usize = 40;

/// Rank 0's confusion.png: every class, or only the classes that occur when the model has
/// more outputs (1000 ImageNet classes, a dozen in the data); none when even those are too many.
/// Folder names are shown readable (`n02085620-Chihuahua` as `Chihuahua`).
fn save_confusion_plot(
    dist: &Dist,
    cm: &crate::train::ConfusionMatrix,
    names: &[String],
    out: &std::path::Path,
) -> Result<()> {
    let present = cm.present_classes();
    if present.len() > PLOTTED_CLASSES {
        dist.println(format!(
            "confusion.png not drawn: {} classes occur (at most {PLOTTED_CLASSES} are drawn)",
            present.len()
        ));
        return Ok(());
    }
    let shown: Vec<usize> = if cm.classes() <= PLOTTED_CLASSES && names.len() == cm.classes() {
        (0..cm.classes()).collect()
    } else {
        present
    };
    let label = |i: usize| names.get(i).map_or(i.to_string(), |n| readable_class_name(n));
    let labels: Vec<String> = shown.iter().map(|&i| label(i)).collect();
    confusion_matrix_plot(&cm.restricted(&shown), &labels)?.save(out.join("confusion.png"))
}
