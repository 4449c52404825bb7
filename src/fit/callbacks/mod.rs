//! Hooks into a [`Trainer`](crate::fit::Trainer) run: the [`Callback`] trait, with the moments of
//! Lightning's callbacks (fit start, train steps, train/validation epoch end, checkpoint
//! saved, fit end) and one that acts on the run (`control.rs`), and the list a run calls them
//! through. The built-in observers live in this
//! wing as callbacks too: the epoch line, `metrics.jsonl`, the step logs (`steps.csv`,
//! TensorBoard event files) and the live curves; the launcher's report lines are written from
//! here as well (`launcher_report.rs`), by the run, since they carry the checkpointer's view.
pub(crate) mod control;
pub(crate) mod epoch_line;
mod event_file;
pub(crate) mod gradient_noise;
pub(crate) mod launcher_report;
pub(crate) mod live_curves;
pub(crate) mod metrics_log;
pub(crate) mod step_csv;
pub(crate) mod tensorboard;
pub(crate) mod val_steps_log;

use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::fit::outcome::FitReport;
use crate::stateful::PartState;
use crate::train::{BeforeOptimizerStep, EpochRecord, EpochSummary, StepRecord};
use crate::Result;

/// Where a run starts, as its callbacks are told.
#[derive(Clone, Debug)]
pub struct FitStart<'a> {
    /// This rank (callbacks run on every rank; the built-in logs write on rank 0 only).
    pub rank: usize,
    /// Ranks in the run.
    pub world_size: usize,
    /// The run's output folder.
    pub out: &'a Path,
    /// The first epoch this call trains (0-based).
    pub first_epoch: u64,
    /// Optimizer steps already taken (by the run this one resumes; 0 for a new run).
    pub steps_done: u64,
    /// Whether this run continues from a checkpoint: a log written by the interrupted run
    /// holds steps after `steps_done` that this run will take again.
    pub resumed: bool,
    /// The run's epochs in all (`FitConfig::epochs`).
    pub epochs: u64,
    /// The records of the epochs before `first_epoch` (a resumed run's, from its metrics log).
    pub history: &'a [EpochRecord],
}

/// Something that acts at the moments of a training run: logging, plotting, a custom metric,
/// a notification. Every method has a default that does nothing; an error ends the run with
/// that error. Register one with [`Trainer::callback`](crate::fit::Trainer::callback).
///
/// `on_train_steps` adds no wait for the device: step records are read together with the
/// running metrics (at progress lines, step checkpoints and the epoch's end) and arrive in
/// bursts, in step order.
///
/// ```
/// use trainbook::fit::Callback;
/// use trainbook::train::StepRecord;
///
/// /// Keeps the smallest step loss seen.
/// #[derive(Default)]
/// struct LowestLoss(Option<f64>);
///
/// impl Callback for LowestLoss {
///     fn on_train_steps(&mut self, steps: &[StepRecord]) -> trainbook::Result<()> {
///         for s in steps {
///             self.0 = Some(self.0.map_or(s.loss, |l: f64| l.min(s.loss)));
///         }
///         Ok(())
///     }
/// }
/// ```
pub trait Callback: Send {
    /// The run starts (after any resume, before the first epoch it trains).
    fn on_fit_start(&mut self, _start: &FitStart) -> Result<()> {
        Ok(())
    }
    /// Before every optimizer step, once the accumulation window's gradients are in (and
    /// all-reduced, under DDP), before clipping (Lightning's `on_before_optimizer_step`): what is
    /// done to the gradients here, the step applies. [`BeforeOptimizerStep::optimizer`] gives
    /// the optimizer with true gradients (unscaled first under a float16 loss scaler). On
    /// every rank: a change that should be the same everywhere must be computed the same on
    /// every rank (see [`GradientNoise`](crate::fit::GradientNoise)).
    fn on_before_optimizer_step(&mut self, _step: &mut BeforeOptimizerStep) -> Result<()> {
        Ok(())
    }
    /// Training steps were read from the device (see the trait's note on bursts).
    fn on_train_steps(&mut self, _steps: &[StepRecord]) -> Result<()> {
        Ok(())
    }
    /// An epoch's training ended (`epoch` 0-based); `steps_done` counts the run's steps.
    fn on_train_epoch_end(
        &mut self,
        _epoch: u64,
        _train: &EpochSummary,
        _steps_done: u64,
    ) -> Result<()> {
        Ok(())
    }
    /// An epoch's validation ended.
    fn on_validation_epoch_end(
        &mut self,
        _epoch: u64,
        _val: &EpochSummary,
        _steps_done: u64,
    ) -> Result<()> {
        Ok(())
    }
    /// An epoch's validation ended, with the run in hand ([`RunControl`](control::RunControl)):
    /// stop the run, set the learning rate, log values into the epoch's record. Runs after the
    /// learning-rate schedule's epoch step and before the epoch's checkpoint.
    fn on_validation_end(&mut self, _run: &mut control::RunControl) -> Result<()> {
        Ok(())
    }
    /// A validation in the middle of an epoch ended
    /// ([`Trainer::val_every_steps`](crate::fit::Trainer::val_every_steps)), after optimizer
    /// step `steps_done` of epoch `epoch`.
    fn on_step_validation(
        &mut self,
        _epoch: u64,
        _steps_done: u64,
        _val: &EpochSummary,
    ) -> Result<()> {
        Ok(())
    }
    /// An epoch ended: its record, as `metrics.jsonl` gets it.
    fn on_epoch_end(&mut self, _record: &EpochRecord, _steps_done: u64) -> Result<()> {
        Ok(())
    }
    /// A checkpoint (`step-*` or `best/`) was handed to the writer (rank 0 writes it, in the
    /// background: it is complete at the next checkpoint or the run's end).
    fn on_checkpoint_saved(&mut self, _dir: &Path) -> Result<()> {
        Ok(())
    }
    /// The run ended: finished, stopped early or interrupted (not on an error).
    fn on_fit_end(&mut self, _report: &FitReport) -> Result<()> {
        Ok(())
    }

    /// The key under which checkpoints keep this callback's state (Lightning's
    /// `Callback.state_key`), or `None`, the default: the callback keeps no state across a
    /// resume. With a key, the callback is one of the run's parts ([`crate::Stateful`]): every
    /// checkpoint saves its [`state_dict`](Self::state_dict), and a resumed run puts it back
    /// with [`load_state_dict`](Self::load_state_dict) before
    /// [`on_fit_start`](Self::on_fit_start) (a checkpoint without it leaves the callback as it
    /// is, and the run says so). The key follows [`crate::check_state_key`] and no other part of
    /// the run may have it (the built-in ones: `schedule`, `grad_scaler`, `early_stopping`,
    /// `ema`, `data_layout`); the run refuses both, naming the key, before it trains.
    ///
    /// ```
    /// use trainbook::fit::Callback;
    /// use trainbook::train::EpochSummary;
    /// use trainbook::PartState;
    ///
    /// /// Counts the epochs trained, across resumes.
    /// #[derive(Default)]
    /// struct Epochs(u64);
    ///
    /// impl Callback for Epochs {
    ///     fn on_train_epoch_end(&mut self, _: u64, _: &EpochSummary, _: u64) -> trainbook::Result<()> {
    ///         self.0 += 1;
    ///         Ok(())
    ///     }
    ///     fn state_key(&self) -> Option<String> {
    ///         Some("epochs_trained".into())
    ///     }
    ///     fn state_dict(&self) -> trainbook::Result<PartState> {
    ///         PartState::of_serde(&self.0)
    ///     }
    ///     fn load_state_dict(&mut self, state: PartState) -> trainbook::Result<()> {
    ///         self.0 = state.parse("epochs_trained")?;
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let mut back = Epochs(0);
    /// back.load_state_dict(Epochs(4).state_dict()?)?;
    /// assert_eq!(back.0, 4);
    /// # Ok::<(), trainbook::Error>(())
    /// ```
    fn state_key(&self) -> Option<String> {
        None
    }
    /// The callback's state now, for a checkpoint (see [`state_key`](Self::state_key)); only
    /// called when it has a key. The default is an empty state.
    fn state_dict(&self) -> Result<PartState> {
        Ok(PartState::default())
    }
    /// Puts back a state that [`state_dict`](Self::state_dict) returned (on a resume; only
    /// called when the callback has a key). The default ignores it.
    fn load_state_dict(&mut self, _state: PartState) -> Result<()> {
        Ok(())
    }
}

/// A callback shared with its caller: a [`Trainer`](crate::fit::Trainer) is `Clone`, and the caller
/// keeps a handle to read what the callback gathered after the run.
pub type SharedCallback = Arc<Mutex<dyn Callback>>;

/// What [`Trainer::callback`](crate::fit::Trainer::callback) takes: a callback, moved in, or one
/// the caller shares (`Arc<Mutex<C>>`, or a [`SharedCallback`]), a clone kept to read what it
/// gathered after the run.
pub trait IntoSharedCallback {
    /// The callback as the run holds it.
    fn into_shared_callback(self) -> SharedCallback;
}

impl<C: Callback + 'static> IntoSharedCallback for C {
    fn into_shared_callback(self) -> SharedCallback {
        Arc::new(Mutex::new(self))
    }
}

impl<C: Callback + 'static> IntoSharedCallback for Arc<Mutex<C>> {
    fn into_shared_callback(self) -> SharedCallback {
        self
    }
}

impl IntoSharedCallback for SharedCallback {
    fn into_shared_callback(self) -> SharedCallback {
        self
    }
}

/// The callbacks of a run, called in the order they were added ([`FitConfig::callbacks`](crate::fit::FitConfig::callbacks)).
#[derive(Clone, Default)]
pub struct Callbacks(Vec<SharedCallback>);

impl std::fmt::Debug for Callbacks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{} callbacks]", self.0.len())
    }
}

impl Callbacks {
    /// Adds `callback` after the others.
    pub fn push(&mut self, callback: SharedCallback) {
        self.0.push(callback);
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Hands every callback (shared) to `f`, in order.
    pub(crate) fn each_shared(&self, f: impl FnMut(SharedCallback)) {
        self.0.iter().cloned().for_each(f);
    }

    /// Calls `f` on every callback in order; the first error ends the call.
    pub(crate) fn each(&self, mut f: impl FnMut(&mut dyn Callback) -> Result<()>) -> Result<()> {
        for c in &self.0 {
            // A callback that panicked earlier left its lock poisoned: its state is still there.
            let mut guard = c.lock().unwrap_or_else(|e| e.into_inner());
            f(&mut *guard)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Count(Vec<u64>);
    impl Callback for Count {
        fn on_train_steps(&mut self, steps: &[StepRecord]) -> Result<()> {
            self.0.extend(steps.iter().map(|s| s.step));
            Ok(())
        }
    }

    #[test]
    fn callbacks_run_in_order_and_the_caller_keeps_their_state() {
        let first = Arc::new(Mutex::new(Count::default()));
        let second = Arc::new(Mutex::new(Count::default()));
        let mut list = Callbacks::default();
        list.push(first.clone());
        list.push(second.clone());
        let step = |n| StepRecord {
            step: n,
            epoch: 0,
            batches_done: n as usize,
            loss: 1.0,
            lr: 0.1,
            grad_norm: None,
            wall_time: 0.0,
            metrics: Vec::new(),
        };
        list.each(|c| c.on_train_steps(&[step(1), step(2)])).unwrap();
        assert_eq!(first.lock().unwrap().0, [1, 2]);
        assert_eq!(second.lock().unwrap().0, [1, 2]);
        let failing = list.each(|_| Err(crate::Error::InvalidArgument("stop".into())));
        assert!(failing.is_err());
    }
}
