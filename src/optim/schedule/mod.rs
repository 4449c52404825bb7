//! Learning-rate schedules with torch's semantics, behind one trait, [`LrSchedule`]:
//! [`ReduceLROnPlateau`] (stepped per epoch with the validation metric), [`StepLR`] and
//! [`CosineAnnealingLR`] (per epoch by default), [`MultiStepLR`], [`ExponentialLR`],
//! [`PolynomialLR`], [`CosineAnnealingWarmRestarts`], [`LambdaLR`] and [`MultiplicativeLR`]
//! (per epoch by default), [`LinearLR`] and [`ConstantLR`] (warmups, per optimizer step by
//! default), [`OneCycleLR`] and [`CyclicLR`] (per optimizer step, their momentum too) and [`SWALR`] (stochastic weight averaging's,
//! per epoch), and two that combine others:
//! [`SequentialLR`] (one after another) and [`ChainedScheduler`] (all at once). Each is a small serde struct whose state
//! goes into checkpoints as JSON ([`LrSchedule::state`], [`LrSchedule::load_state`]).
//!
//! The values are those of torch's `get_last_lr()` when its scheduler is stepped the usual way
//! (`scheduler.step()` without an epoch argument): the chainable (recursive) forms for
//! `StepLR`, `CosineAnnealingLR`, `LinearLR`, `ConstantLR`, `MultiStepLR`, `ExponentialLR`, `PolynomialLR` and
//! `MultiplicativeLR`, the closed form for `OneCycleLR`, `CyclicLR`, `CosineAnnealingWarmRestarts` and
//! `LambdaLR`, which torch computes only that way.
mod compose;
mod cyclic;
mod decay;
mod factor;
mod lambda;
mod mode;
mod momentum_cycle;
mod one_cycle;
mod plateau;
mod restarts;
mod swa_lr;
mod warmup;

use serde::{Deserialize, Serialize};

pub use compose::{ChainedScheduler, SequentialLR};
pub use cyclic::{CyclicLR, CyclicMode};
pub use decay::{CosineAnnealingLR, StepLR};
pub use factor::{ExponentialLR, MultiStepLR, PolynomialLR};
pub use lambda::{LambdaLR, LrLambda, MultiplicativeLR};
pub use mode::Mode;
pub use momentum_cycle::MomentumCycle;
pub use one_cycle::OneCycleLR;
pub use plateau::ReduceLROnPlateau;
pub use restarts::CosineAnnealingWarmRestarts;
pub use swa_lr::SWALR;
pub use warmup::{Anneal, ConstantLR, LinearLR};

use crate::{Error, Result};

/// When a schedule steps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Cadence {
    /// Once per epoch, after validation (torch's usual `scheduler.step()` at the epoch's end).
    #[default]
    Epoch,
    /// After every optimizer step (torch's `scheduler.step()` after `optimizer.step()` in the
    /// batch loop), e.g. a warmup or a one-cycle policy.
    Step,
}

/// The validation results of an epoch, which an epoch-wise schedule may look at
/// ([`ReduceLROnPlateau`] does: the run's monitored metric when it has one, else the loss in
/// [`Mode::Min`](crate::train::Mode::Min), the accuracy in [`Mode::Max`](crate::train::Mode::Max)).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Validation {
    /// Mean per-sample validation loss.
    pub loss: f64,
    /// Validation accuracy, a fraction in [0, 1].
    pub accuracy: f64,
    /// The run's monitored metric ([`Trainer::monitor`](crate::fit::Trainer::monitor)), when
    /// one is set.
    pub monitored: Option<f64>,
}

/// A learning-rate schedule: what [`Trainer::schedule`](crate::fit::Trainer::schedule) drives.
///
/// The calls mirror torch's: [`start`](Self::start) is the scheduler's constructor (which
/// may already change the learning rate: `LinearLR`, `OneCycleLR`), [`advance`](Self::advance)
/// is `scheduler.step()`, called after every epoch or every optimizer step per
/// [`cadence`](Self::cadence); both take the optimizer's current rate and return the rate to
/// set (`optimizer.set_lr`). [`state`](Self::state) and [`load_state`](Self::load_state) are
/// `state_dict()`/`load_state_dict()` as JSON, for checkpoints.
///
/// ```
/// use trainbook::train::{LrSchedule, OneCycleLR, StepLR};
/// # fn main() -> trainbook::Result<()> {
/// // torch: StepLR(SGD(params, lr=0.1), step_size=2, gamma=0.5), stepped 4 times.
/// let mut sched = StepLR::new(2, 0.5);
/// let mut lr = sched.start(0.1)?;
/// let mut lrs = vec![lr];
/// for _ in 0..4 {
///     lr = sched.advance(lr, None)?; // optimizer.set_lr(lr)
///     lrs.push(lr);
/// }
/// assert_eq!(lrs, [0.1, 0.1, 0.05, 0.05, 0.025]);
///
/// // A schedule's state is JSON: a copy restored from it continues identically.
/// let mut one_cycle = OneCycleLR::new(0.1, 10);
/// let mut lr = one_cycle.start(0.1)?; // max_lr / div_factor = 0.004
/// lr = one_cycle.advance(lr, None)?;
/// let mut restored = OneCycleLR::new(0.1, 10);
/// restored.load_state(&one_cycle.state())?;
/// assert_eq!(restored.advance(lr, None)?, one_cycle.advance(lr, None)?);
/// # Ok(()) }
/// ```
pub trait LrSchedule: std::fmt::Debug + Send + Sync {
    /// torch's class name, e.g. `"StepLR"` (used in messages).
    fn name(&self) -> &'static str;

    /// Whether [`advance`](Self::advance) is called per epoch or per optimizer step.
    fn cadence(&self) -> Cadence;

    /// Checks the hyper-parameters: [`Error::InvalidArgument`] naming the first bad one.
    /// [`start`](Self::start), [`advance`](Self::advance) and
    /// [`load_state`](Self::load_state) check too.
    fn validate(&self) -> Result<()>;

    /// Starts (or restarts) the schedule for an optimizer whose rate is `lr`, as torch's
    /// constructor does, and returns the rate of the first step.
    fn start(&mut self, lr: f64) -> Result<f64>;

    /// Starts the schedule on an optimizer that other schedules already started (in a
    /// [`ChainedScheduler`]): `lr` is the current rate, `initial_lr` the optimizer's rate before
    /// any schedule (torch's `initial_lr`, from which every scheduler takes its `base_lrs`).
    /// The default is [`start`](Self::start)`(lr)`, right for schedules that need no base rate.
    fn start_chained(&mut self, lr: f64, initial_lr: f64) -> Result<f64> {
        let _ = initial_lr;
        self.start(lr)
    }

    /// Restarts the schedule at step 0 from `initial_lr` as torch's `step(0)` does (its closed
    /// form at step 0), which is how [`SequentialLR`] switches to the next schedule at a
    /// milestone. The default is [`start`](Self::start)`(initial_lr)`, the same value bit for
    /// bit for every schedule whose start is a product of the rate.
    fn restart(&mut self, initial_lr: f64) -> Result<f64> {
        self.start(initial_lr)
    }

    /// [`restart`](Self::restart) where the schedule may need the rate the previous one left,
    /// `lr` ([`MultiplicativeLR`]: torch's `step(0)` keeps it). The default ignores `lr`.
    fn restart_from(&mut self, lr: f64, initial_lr: f64) -> Result<f64> {
        let _ = lr;
        self.restart(initial_lr)
    }

    /// One step of the schedule (torch's `scheduler.step()`): `lr` is the optimizer's current
    /// rate; returns the rate to use next. `validation` is the epoch's results for an
    /// epoch-wise schedule in `Trainer::fit` (`None` per optimizer step);
    /// [`ReduceLROnPlateau`] needs it.
    fn advance(&mut self, lr: f64, validation: Option<Validation>) -> Result<f64>;

    /// The momentum the schedule sets with its rate, for the next optimizer step: after
    /// [`start`](Self::start), [`advance`](Self::advance) or [`load_state`](Self::load_state),
    /// what torch's scheduler has written into the param groups' `momentum` (SGD) or `betas[0]`
    /// (Adam) by then. Only [`OneCycleLR`] and [`CyclicLR`] set one (torch's `cycle_momentum`); the default,
    /// `None`, leaves the optimizer's momentum alone.
    /// [`Optimizer::set_momentum`](crate::train::Optimizer::set_momentum) writes it;
    /// `Trainer::fit` does.
    fn momentum(&self) -> Option<f64> {
        None
    }

    /// The copy of the schedule for param group `group` of an optimizer with `groups` groups,
    /// before [`start`](Self::start): a schedule whose hyper-parameters torch also takes as a
    /// list, one per group, picks that group's ([`OneCycleLR::group_max_lrs`]); a list of
    /// another length is an [`Error::InvalidArgument`], as torch's `ValueError`. `Trainer::fit`
    /// starts one copy per group this way. The default is a plain copy.
    fn for_group(&self, group: usize, groups: usize) -> Result<Box<dyn LrSchedule>> {
        let _ = (group, groups);
        Ok(self.box_clone())
    }

    /// Steps taken since [`start`](Self::start) (torch's `last_epoch`).
    fn steps(&self) -> u64;

    /// The whole schedule (hyper-parameters and progress) as JSON, for a checkpoint.
    fn state(&self) -> serde_json::Value;

    /// Replaces the schedule by one saved with [`state`](Self::state);
    /// [`Error::Checkpoint`] when `state` is not this kind of schedule's.
    fn load_state(&mut self, state: &serde_json::Value) -> Result<()>;

    /// A boxed copy (so that a `Box<dyn LrSchedule>` is `Clone`).
    fn box_clone(&self) -> Box<dyn LrSchedule>;
}

impl Clone for Box<dyn LrSchedule> {
    fn clone(&self) -> Self {
        self.box_clone()
    }
}

/// A boxed schedule is a schedule (a schedule chosen at run time, e.g. from a command-line
/// flag, goes to [`Trainer::schedule`](crate::fit::Trainer::schedule) as it is): every call
/// goes to the boxed one.
impl LrSchedule for Box<dyn LrSchedule> {
    fn name(&self) -> &'static str {
        (**self).name()
    }
    fn cadence(&self) -> Cadence {
        (**self).cadence()
    }
    fn validate(&self) -> Result<()> {
        (**self).validate()
    }
    fn start(&mut self, lr: f64) -> Result<f64> {
        (**self).start(lr)
    }
    fn start_chained(&mut self, lr: f64, initial_lr: f64) -> Result<f64> {
        (**self).start_chained(lr, initial_lr)
    }
    fn restart(&mut self, initial_lr: f64) -> Result<f64> {
        (**self).restart(initial_lr)
    }
    fn restart_from(&mut self, lr: f64, initial_lr: f64) -> Result<f64> {
        (**self).restart_from(lr, initial_lr)
    }
    fn advance(&mut self, lr: f64, validation: Option<Validation>) -> Result<f64> {
        (**self).advance(lr, validation)
    }
    fn momentum(&self) -> Option<f64> {
        (**self).momentum()
    }
    fn for_group(&self, group: usize, groups: usize) -> Result<Box<dyn LrSchedule>> {
        (**self).for_group(group, groups)
    }
    fn steps(&self) -> u64 {
        (**self).steps()
    }
    fn state(&self) -> serde_json::Value {
        (**self).state()
    }
    fn load_state(&mut self, state: &serde_json::Value) -> Result<()> {
        (**self).load_state(state)
    }
    fn box_clone(&self) -> Box<dyn LrSchedule> {
        (**self).box_clone()
    }
}

/// The `LrSchedule` methods every schedule implements alike: its step count is its
/// `last_epoch` field, and its state is the whole struct as JSON (read back and re-validated).
macro_rules! state_methods {
    () => {
        fn steps(&self) -> u64 {
            self.last_epoch
        }
        fn state(&self) -> serde_json::Value {
            to_state(self)
        }
        fn load_state(&mut self, state: &serde_json::Value) -> Result<()> {
            *self = from_state(self.name(), state)?;
            Ok(())
        }
        fn box_clone(&self) -> Box<dyn LrSchedule> {
            Box::new(self.clone())
        }
    };
}
use state_methods;

/// `value` as JSON (a schedule's fields never fail to serialise).
fn to_state<T: Serialize>(value: &T) -> serde_json::Value {
    serde_json::to_value(value).unwrap_or(serde_json::Value::Null)
}

/// A schedule of kind `name` read back from `state`, its hyper-parameters checked.
fn from_state<T: serde::de::DeserializeOwned + LrSchedule>(
    name: &str,
    state: &serde_json::Value,
) -> Result<T> {
    let s: T = serde_json::from_value(state.clone())
        .map_err(|e| Error::Checkpoint(format!("{name} state {state}: {e}")))?;
    // Every field read must be one the schedule has (serde's deny_unknown_fields, which its
    // flattened parts rule out): what it writes back names them all.
    if let (Some(read), serde_json::Value::Object(kept)) = (state.as_object(), s.state()) {
        if let Some(field) = read.keys().find(|k| !kept.contains_key(*k)) {
            return Err(Error::Checkpoint(format!(
                "{name} state {state}: unknown field `{field}`"
            )));
        }
    }
    s.validate()?;
    Ok(s)
}

/// Entry `group` of the per-group list `field` that stands for torch's list form of `params`
/// (one value per param group): an [`Error::InvalidArgument`] as torch's `ValueError` ("expected
/// {groups} values for ...") when the list is not `groups` long.
fn group_entry<T: Copy>(
    schedule: &str,
    params: &str,
    field: &str,
    list: &[T],
    (group, groups): (usize, usize),
) -> Result<T> {
    if list.len() != groups {
        return Err(Error::InvalidArgument(format!(
            "{schedule}: expected {groups} values for {params} (one per param group), got {} \
             ({field})",
            list.len()
        )));
    }
    list.get(group).copied().ok_or_else(|| {
        Error::InvalidArgument(format!("{schedule}: no param group {group} of {groups}"))
    })
}

/// [`Error::InvalidArgument`] for `schedule`'s parameter `param` unless `ok`.
fn check(
    ok: bool,
    schedule: &str,
    param: &str,
    expected: &str,
    got: impl std::fmt::Display,
) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!("{schedule}: {param} must be {expected}, got {got}")))
    }
}

#[cfg(test)]
mod tests;
