//! Decays stepped per epoch by default: [`StepLR`] and [`CosineAnnealingLR`].
use serde::{Deserialize, Serialize};

use super::{check, from_state, state_methods, to_state, Cadence, LrSchedule, Validation};
use crate::Result;

/// `torch.optim.lr_scheduler.StepLR`: multiply by `gamma` every `step_size` epochs (or
/// optimizer steps, with [`stepping`](Self::stepping)`(Cadence::Step)`).
///
/// ```
/// use trainbook::train::{LrSchedule, StepLR};
/// # fn main() -> trainbook::Result<()> {
/// let mut sched = StepLR::new(30, 0.1); // torch: StepLR(optimizer, step_size=30, gamma=0.1)
/// let mut lr = sched.start(0.05)?;
/// for _epoch in 0..30 {
///     // ... train and validate the epoch with `lr` ...
///     lr = sched.advance(lr, None)?;
/// }
/// assert_eq!(lr, 0.05 * 0.1);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepLR {
    /// Period of the decay in steps (at least 1).
    pub step_size: u64,
    /// Multiplicative factor of the decay (at least 0).
    pub gamma: f64,
    /// Per epoch (the default) or per optimizer step.
    #[serde(default)]
    pub cadence: Cadence,
    last_epoch: u64,
}

impl StepLR {
    /// `StepLR(optimizer, step_size, gamma)`, stepped per epoch. Arguments are checked by
    /// [`LrSchedule::validate`] (and `start`/`advance`): a `step_size` of 0 or a negative
    /// `gamma` is an [`Error::InvalidArgument`](crate::Error::InvalidArgument).
    pub fn new(step_size: u64, gamma: f64) -> Self {
        StepLR { step_size, gamma, cadence: Cadence::Epoch, last_epoch: 0 }
    }
    /// Steps per epoch ([`Cadence::Epoch`], the default) or per optimizer step.
    pub fn stepping(mut self, cadence: Cadence) -> Self {
        self.cadence = cadence;
        self
    }
    /// Advances one step and returns the learning rate to use next (torch's chainable form:
    /// `lr * gamma` when the step count is a multiple of `step_size`, else `lr`). Unchecked:
    /// prefer [`LrSchedule::advance`], which reports bad arguments (here a `step_size` of 0 is
    /// taken as 1).
    pub fn step(&mut self, lr: f64) -> f64 {
        self.last_epoch += 1;
        if self.last_epoch % self.step_size.max(1) == 0 {
            lr * self.gamma
        } else {
            lr
        }
    }
}

impl LrSchedule for StepLR {
    fn name(&self) -> &'static str {
        "StepLR"
    }
    fn cadence(&self) -> Cadence {
        self.cadence
    }
    fn validate(&self) -> Result<()> {
        check(self.step_size >= 1, self.name(), "step_size", "at least 1", self.step_size)?;
        let gamma_ok = self.gamma >= 0.0 && self.gamma.is_finite();
        check(gamma_ok, self.name(), "gamma", "finite and >= 0", self.gamma)
    }
    fn start(&mut self, lr: f64) -> Result<f64> {
        self.validate()?;
        self.last_epoch = 0;
        Ok(lr)
    }
    fn advance(&mut self, lr: f64, _validation: Option<Validation>) -> Result<f64> {
        self.validate()?;
        Ok(self.step(lr))
    }
    state_methods!();
}

/// `torch.optim.lr_scheduler.CosineAnnealingLR` in torch's recursive form: from `base_lr`
/// down to `eta_min` over `t_max` epochs (or optimizer steps, with
/// [`stepping`](Self::stepping)`(Cadence::Step)`), then back up, periodically.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CosineAnnealingLR {
    /// Steps of a half cosine period, from `base_lr` down to `eta_min` (at least 1).
    pub t_max: u64,
    /// The lowest learning rate (at least 0).
    pub eta_min: f64,
    /// The initial learning rate; [`LrSchedule::start`] sets it to the optimizer's rate, as
    /// torch takes its `base_lrs` from the optimizer.
    pub base_lr: f64,
    /// Per epoch (the default) or per optimizer step.
    #[serde(default)]
    pub cadence: Cadence,
    last_epoch: u64,
}

impl CosineAnnealingLR {
    /// `CosineAnnealingLR(optimizer, T_max=t_max, eta_min)` for an optimizer whose initial
    /// learning rate is `base_lr`, stepped per epoch. Arguments are checked by
    /// [`LrSchedule::validate`]: a `t_max` of 0 or a negative `eta_min` is an
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument).
    pub fn new(base_lr: f64, t_max: u64, eta_min: f64) -> Self {
        CosineAnnealingLR { t_max, eta_min, base_lr, cadence: Cadence::Epoch, last_epoch: 0 }
    }
    /// Steps per epoch ([`Cadence::Epoch`], the default) or per optimizer step.
    pub fn stepping(mut self, cadence: Cadence) -> Self {
        self.cadence = cadence;
        self
    }
    /// Advances one step and returns the learning rate to use next. Unchecked: prefer
    /// [`LrSchedule::advance`], which reports bad arguments (here a `t_max` of 0 is taken as 1).
    pub fn step(&mut self, lr: f64) -> f64 {
        use std::f64::consts::PI;
        self.last_epoch += 1;
        let t_max = self.t_max.max(1);
        let (e, t) = (self.last_epoch as f64, t_max as f64);
        if (self.last_epoch as i64 - 1 - t_max as i64).rem_euclid(2 * t_max as i64) == 0 {
            lr + (self.base_lr - self.eta_min) * (1.0 - (PI / t).cos()) / 2.0
        } else {
            (1.0 + (PI * e / t).cos()) / (1.0 + (PI * (e - 1.0) / t).cos()) * (lr - self.eta_min)
                + self.eta_min
        }
    }
}

impl LrSchedule for CosineAnnealingLR {
    fn name(&self) -> &'static str {
        "CosineAnnealingLR"
    }
    fn cadence(&self) -> Cadence {
        self.cadence
    }
    fn validate(&self) -> Result<()> {
        check(self.t_max >= 1, self.name(), "t_max", "at least 1", self.t_max)?;
        let eta_ok = self.eta_min >= 0.0 && self.eta_min.is_finite();
        check(eta_ok, self.name(), "eta_min", "finite and >= 0", self.eta_min)?;
        check(self.base_lr.is_finite(), self.name(), "base_lr", "finite", self.base_lr)
    }
    /// Takes `lr` as `base_lr` (torch's `base_lrs` are the optimizer's rates) and returns it.
    fn start(&mut self, lr: f64) -> Result<f64> {
        self.base_lr = lr;
        self.validate()?;
        self.last_epoch = 0;
        Ok(lr)
    }
    /// Takes `initial_lr` as `base_lr` (torch's `base_lrs`) and returns `lr`, the rate the
    /// schedules before it left: its first step changes nothing.
    fn start_chained(&mut self, lr: f64, initial_lr: f64) -> Result<f64> {
        self.start(initial_lr)?;
        Ok(lr)
    }
    /// torch's closed form at step 0, `eta_min + (base_lr - eta_min) * (1 + cos 0) / 2`, which
    /// may differ from `base_lr` in the last bit.
    fn restart(&mut self, initial_lr: f64) -> Result<f64> {
        self.start(initial_lr)?;
        let (base, eta, t) = (self.base_lr, self.eta_min, self.t_max as f64);
        Ok(eta + (base - eta) * (1.0 + (std::f64::consts::PI * 0.0 / t).cos()) / 2.0)
    }
    fn advance(&mut self, lr: f64, _validation: Option<Validation>) -> Result<f64> {
        self.validate()?;
        Ok(self.step(lr))
    }
    state_methods!();
}
