//! The end of a run and its judging: which metric `best/` keeps by, the best weights put back
//! (`Trainer::restore_best`), the best accuracy reported, rank 0's files (curves.png,
//! confusion.png, model.safetensors), a resumed run with nothing left to train, and the report
//! to the launcher and the callbacks.
use tch::nn::VarStore;

use crate::checkpoint::{Checkpointer, Policy};
use crate::data::readable_class_name;
use crate::dist::Dist;
use crate::figures::{confusion_matrix_plot, loss_accuracy_curves};
use crate::fit::callbacks::launcher_report as report;
use crate::fit::config::FitConfig;
use crate::fit::outcome::FitReport;
use crate::fit::stop::interrupt::Interruption;
use crate::models::{load_safetensors, save_safetensors};
use crate::train::{ConfusionMatrix, EpochRecord, ModelEma, Monitor, Task};
use crate::Result;

use super::{max_steps, Run};

/// What a resumed run with nothing left to train says (all `cfg.epochs` done, or stopped early
/// after `done` epochs), and how to train again.
pub(crate) fn nothing_to_train(
    cfg: &FitConfig,
    done: u64,
    (stopped_early, at_max_steps): (bool, bool),
) -> String {
    let why = if stopped_early {
        format!("early stopping ended it after {done} epochs")
    } else if let Some(m) = cfg.max_steps.filter(|_| at_max_steps) {
        format!("its {m} max_steps are done")
    } else {
        format!("{done} of {} epochs done", cfg.epochs)
    };
    format!(
        "{} holds a finished run ({why}): nothing to train. To train again, start over without \
         resuming (Trainer::resume(false); --no-resume in the examples), choose another output \
         folder (--out), or ask for more epochs (--epochs) or steps (--max-steps).",
        cfg.out.display(),
    )
}

/// Rank 0's files at the end of a run that trained: the curves, the confusion matrix (a data
/// set without class names, a bare `TensorDataset`, has none), the final weights and their
/// moving average when the run keeps one (`model_ema.safetensors`).
pub(crate) fn write_outputs(
    dist: &Dist,
    cfg: &FitConfig,
    (vs, ema): (&VarStore, Option<&ModelEma>),
    history: &[EpochRecord],
    confusion: Option<&ConfusionMatrix>,
    class_names: &[String],
) -> Result<()> {
    if !dist.is_main() || history.is_empty() {
        return Ok(());
    }
    // The weights first: a figure that cannot be drawn (no font on a cluster node) must not
    // cost the run its model, so the figures only warn.
    if let Some(ema) = ema {
        crate::models::save_tensors_file(
            &ema.state_dict(),
            &cfg.out.join("model_ema.safetensors"),
        )?;
    }
    save_safetensors(vs, &cfg.out.join("model.safetensors"))?;
    let figures = loss_accuracy_curves(history)
        .and_then(|f| f.save(cfg.out.join("curves.png")))
        .and_then(|()| match confusion.filter(|cm| cm.classes() > 0) {
            Some(cm) => save_confusion_plot(dist, cm, class_names, &cfg.out),
            None => Ok(()),
        });
    if let Err(e) = figures {
        eprintln!("trainbook: warning: the run's figures were not drawn ({e}); its weights and metrics.jsonl are saved");
    }
    Ok(())
}

/// The metric `best/` is kept by (`None` without `best/`): [`FitConfig::monitor`] when one is
/// set, else the `task`'s metric for the policy's mode ([`Monitor::default_for`]: accuracy or
/// the loss for classification, as always).
pub(crate) fn best_monitor(cfg: &FitConfig, task: Task) -> Option<Monitor> {
    cfg.policy.best.map(|mode| cfg.monitor.unwrap_or(Monitor::default_for(task, mode)))
}

/// The checkpoint policy with `best/` judged in the direction of `monitor`.
pub(crate) fn best_policy(cfg: &FitConfig, monitor: Option<Monitor>) -> Policy {
    let mut policy = cfg.policy.clone();
    policy.best = monitor.map(Monitor::mode);
    policy
}

/// `Trainer::restore_best`: every rank loads `best/`'s weights (checksums verified), so the
/// model the run returns and its `model.safetensors` are the best epoch's.
pub(crate) fn restore_best(dist: &Dist, vs: &mut VarStore, ckpt: &Checkpointer) -> Result<()> {
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

/// [`FitReport::best_val_acc`]: `best/`'s metric when `best/` is kept by the accuracy (the
/// classification default); with `best/` kept by another metric, the highest validation
/// accuracy of the epochs run (none for regression); `None` without `best/`.
pub(crate) fn best_val_acc(
    monitor: Option<Monitor>,
    ckpt: &Checkpointer,
    history: &[EpochRecord],
) -> Option<f64> {
    match monitor? {
        Monitor::ValAcc => ckpt.best_metric(),
        _ => history.iter().filter_map(|r| r.val_acc).filter(|a| a.is_finite()).reduce(f64::max),
    }
}

/// The most classes a confusion.png shows (a 40x40 grid of counts is still readable).
const PLOTTED_CLASSES: usize = 40;

/// Rank 0's confusion.png: every class, or only the classes that occur when the model has
/// more outputs (1000 ImageNet classes, a dozen in the data); none when even those are too many.
/// Folder names are shown readable (`n02085620-Chihuahua` as `Chihuahua`).
fn save_confusion_plot(
    dist: &Dist,
    cm: &ConfusionMatrix,
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

impl Run<'_> {
    /// A resumed run with nothing left to train (all epochs done, or stopped early): says so
    /// and reports, leaving the finished run's files as they are.
    pub(super) fn finished_already(&self, first_epoch: u64) -> Option<FitReport> {
        let stopped_early = self.parts.early.as_ref().is_some_and(|e| e.stopped());
        let at_max = max_steps::reached(self.cfg.max_steps, self.ckpt.global_step());
        if self.resumed_from.is_none()
            || (first_epoch < self.cfg.epochs && !stopped_early && !at_max)
        {
            return None;
        }
        let (cfg, stopped) = (self.cfg, (stopped_early, at_max));
        self.dist.println(nothing_to_train(cfg, first_epoch, stopped));
        let early_stopped = stopped_early.then(|| first_epoch.saturating_sub(1));
        let outcome = self.report(None, early_stopped);
        report::run_done(self.dist.rank(), &self.cfg.out, &outcome, &self.ckpt);
        Some(outcome)
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
    pub(super) fn end(&mut self, early_stopped: Option<u64>) -> Result<FitReport> {
        let stopped = self.stopped.take();
        let outcome = self.report(stopped, early_stopped);
        report::run_done(self.dist.rank(), &self.cfg.out, &outcome, &self.ckpt);
        self.callbacks.each(|c| c.on_fit_end(&outcome))?;
        Ok(outcome)
    }
}
