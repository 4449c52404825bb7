//! Decays by a factor, torch's chainable forms, per epoch by default: [`MultiStepLR`] (at
//! milestones), [`ExponentialLR`] (every step) and [`PolynomialLR`] (to zero over
//! `total_iters`).
use serde::{Deserialize, Serialize};

use super::{check, from_state, state_methods, to_state, Cadence, LrSchedule, Validation};
use crate::Result;

fn gamma_ok(name: &str, gamma: f64) -> Result<()> {
    check(gamma >= 0.0 && gamma.is_finite(), name, "gamma", "finite and >= 0", gamma)
}

/// `torch.optim.lr_scheduler.MultiStepLR`: multiply by `gamma` at each milestone (a milestone
/// listed `n` times multiplies by `gamma` to the power `n`, as torch's `Counter` does).
///
/// ```
/// use trainbook::train::{LrSchedule, MultiStepLR};
/// # fn main() -> trainbook::Result<()> {
/// let mut sched = MultiStepLR::new(vec![2, 4], 0.1); // torch: MultiStepLR(opt, [2, 4], 0.1)
/// let mut lrs = vec![sched.start(1.0)?];
/// for _ in 0..5 {
///     let lr = sched.advance(*lrs.last().unwrap(), None)?;
///     lrs.push(lr);
/// }
/// assert_eq!(lrs, [1.0, 1.0, 0.1, 0.1, 0.1 * 0.1, 0.1 * 0.1]);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MultiStepLR {
    /// The steps at whose end the rate is multiplied (in any order; repeats count).
    pub milestones: Vec<u64>,
    /// Multiplicative factor (at least 0).
    pub gamma: f64,
    /// Per epoch (the default) or per optimizer step.
    #[serde(default)]
    pub cadence: Cadence,
    last_epoch: u64,
}

impl MultiStepLR {
    /// `MultiStepLR(optimizer, milestones, gamma)`, stepped per epoch.
    pub fn new(milestones: Vec<u64>, gamma: f64) -> Self {
        MultiStepLR { milestones, gamma, cadence: Cadence::Epoch, last_epoch: 0 }
    }
    /// Steps per epoch ([`Cadence::Epoch`], the default) or per optimizer step.
    pub fn stepping(mut self, cadence: Cadence) -> Self {
        self.cadence = cadence;
        self
    }
    /// `lr` times `gamma` to the power of how often `last_epoch` is a milestone.
    fn at_milestone(&self, lr: f64) -> f64 {
        let n = self.milestones.iter().filter(|&&m| m == self.last_epoch).count();
        if n == 0 {
            lr
        } else {
            lr * self.gamma.powf(n as f64)
        }
    }
}

impl LrSchedule for MultiStepLR {
    fn name(&self) -> &'static str {
        "MultiStepLR"
    }
    fn cadence(&self) -> Cadence {
        self.cadence
    }
    fn validate(&self) -> Result<()> {
        gamma_ok(self.name(), self.gamma)
    }
    /// `lr`, or `lr` decayed when 0 is a milestone (torch's constructor steps once at 0).
    fn start(&mut self, lr: f64) -> Result<f64> {
        self.validate()?;
        self.last_epoch = 0;
        Ok(self.at_milestone(lr))
    }
    fn advance(&mut self, lr: f64, _validation: Option<Validation>) -> Result<f64> {
        self.validate()?;
        self.last_epoch += 1;
        Ok(self.at_milestone(lr))
    }
    state_methods!();
}

/// `torch.optim.lr_scheduler.ExponentialLR`: multiply by `gamma` every step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExponentialLR {
    /// Multiplicative factor (at least 0).
    pub gamma: f64,
    /// Per epoch (the default) or per optimizer step.
    #[serde(default)]
    pub cadence: Cadence,
    last_epoch: u64,
}

impl ExponentialLR {
    /// `ExponentialLR(optimizer, gamma)`, stepped per epoch.
    pub fn new(gamma: f64) -> Self {
        ExponentialLR { gamma, cadence: Cadence::Epoch, last_epoch: 0 }
    }
    /// Steps per epoch ([`Cadence::Epoch`], the default) or per optimizer step.
    pub fn stepping(mut self, cadence: Cadence) -> Self {
        self.cadence = cadence;
        self
    }
}

impl LrSchedule for ExponentialLR {
    fn name(&self) -> &'static str {
        "ExponentialLR"
    }
    fn cadence(&self) -> Cadence {
        self.cadence
    }
    fn validate(&self) -> Result<()> {
        gamma_ok(self.name(), self.gamma)
    }
    fn start(&mut self, lr: f64) -> Result<f64> {
        self.validate()?;
        self.last_epoch = 0;
        Ok(lr)
    }
    fn advance(&mut self, lr: f64, _validation: Option<Validation>) -> Result<f64> {
        self.validate()?;
        self.last_epoch += 1;
        Ok(lr * self.gamma)
    }
    state_methods!();
}

/// `torch.optim.lr_scheduler.PolynomialLR`: from the rate down to 0 over `total_iters` steps
/// as `(1 - t / total_iters) ^ power` (torch's chainable form), then constant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolynomialLR {
    /// Steps to reach 0 (at least 1; torch's default 5).
    pub total_iters: u64,
    /// The polynomial's power (finite; torch's default 1.0).
    pub power: f64,
    /// Per epoch (the default) or per optimizer step.
    #[serde(default)]
    pub cadence: Cadence,
    last_epoch: u64,
}

impl PolynomialLR {
    /// `PolynomialLR(optimizer, total_iters, power)`, stepped per epoch.
    pub fn new(total_iters: u64, power: f64) -> Self {
        PolynomialLR { total_iters, power, cadence: Cadence::Epoch, last_epoch: 0 }
    }
    /// Steps per epoch ([`Cadence::Epoch`], the default) or per optimizer step.
    pub fn stepping(mut self, cadence: Cadence) -> Self {
        self.cadence = cadence;
        self
    }
}

impl LrSchedule for PolynomialLR {
    fn name(&self) -> &'static str {
        "PolynomialLR"
    }
    fn cadence(&self) -> Cadence {
        self.cadence
    }
    fn validate(&self) -> Result<()> {
        check(self.total_iters >= 1, self.name(), "total_iters", "at least 1", self.total_iters)?;
        check(self.power.is_finite(), self.name(), "power", "finite", self.power)
    }
    fn start(&mut self, lr: f64) -> Result<f64> {
        self.validate()?;
        self.last_epoch = 0;
        Ok(lr)
    }
    fn advance(&mut self, lr: f64, _validation: Option<Validation>) -> Result<f64> {
        self.validate()?;
        self.last_epoch += 1;
        if self.last_epoch > self.total_iters {
            return Ok(lr);
        }
        let (e, t) = (self.last_epoch as f64, self.total_iters as f64);
        Ok(lr * ((1.0 - e / t) / (1.0 - (e - 1.0) / t)).powf(self.power))
    }
    state_methods!();
}
