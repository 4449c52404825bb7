//! `torch.optim.lr_scheduler.CosineAnnealingWarmRestarts` (SGDR): a cosine from the base rate
//! down to `eta_min` over `t_0` steps, then again from the top over `t_0 * t_mult`, and so on.
use serde::{Deserialize, Serialize};

use super::{check, from_state, state_methods, to_state, Cadence, LrSchedule, Validation};
use crate::Result;

/// SGDR with torch's semantics for `scheduler.step()` without an argument, per epoch by
/// default (per optimizer step with [`stepping`](Self::stepping)`(Cadence::Step)`: whole steps,
/// where torch's users pass fractional epochs).
///
/// ```
/// use trainbook::train::{CosineAnnealingWarmRestarts, LrSchedule};
/// # fn main() -> trainbook::Result<()> {
/// let mut sched = CosineAnnealingWarmRestarts::new(2, 1, 0.0); // torch: (opt, T_0=2)
/// let mut lr = sched.start(1.0)?;
/// let mut lrs = vec![lr];
/// for _ in 0..4 {
///     lr = sched.advance(lr, None)?;
///     lrs.push(lr);
/// }
/// assert_eq!(lrs.iter().map(|x| (x * 1e9).round() / 1e9).collect::<Vec<_>>(), [1.0, 0.5, 1.0, 0.5, 1.0]);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CosineAnnealingWarmRestarts {
    /// Steps of the first cycle (at least 1).
    pub t_0: u64,
    /// Growth of each next cycle (at least 1).
    pub t_mult: u64,
    /// The lowest rate (finite, at least 0).
    pub eta_min: f64,
    /// The rate at the top of each cycle; [`LrSchedule::start`] takes the optimizer's.
    pub base_lr: f64,
    /// Per epoch (the default) or per optimizer step.
    #[serde(default)]
    pub cadence: Cadence,
    t_i: u64,
    t_cur: u64,
    last_epoch: u64,
}

impl CosineAnnealingWarmRestarts {
    /// `CosineAnnealingWarmRestarts(optimizer, T_0=t_0, T_mult=t_mult, eta_min)`.
    pub fn new(t_0: u64, t_mult: u64, eta_min: f64) -> Self {
        CosineAnnealingWarmRestarts {
            t_0,
            t_mult,
            eta_min,
            base_lr: 0.0,
            cadence: Cadence::Epoch,
            t_i: t_0,
            t_cur: 0,
            last_epoch: 0,
        }
    }
    /// Steps per epoch ([`Cadence::Epoch`], the default) or per optimizer step.
    pub fn stepping(mut self, cadence: Cadence) -> Self {
        self.cadence = cadence;
        self
    }
    fn lr(&self) -> f64 {
        let angle = std::f64::consts::PI * self.t_cur as f64 / self.t_i as f64;
        self.eta_min + (self.base_lr - self.eta_min) * (1.0 + angle.cos()) / 2.0
    }
}

impl LrSchedule for CosineAnnealingWarmRestarts {
    fn name(&self) -> &'static str {
        "CosineAnnealingWarmRestarts"
    }
    fn cadence(&self) -> Cadence {
        self.cadence
    }
    fn validate(&self) -> Result<()> {
        check(self.t_0 >= 1, self.name(), "t_0", "at least 1", self.t_0)?;
        check(self.t_mult >= 1, self.name(), "t_mult", "at least 1", self.t_mult)?;
        let eta_ok = self.eta_min >= 0.0 && self.eta_min.is_finite();
        check(eta_ok, self.name(), "eta_min", "finite and >= 0", self.eta_min)?;
        check(self.base_lr.is_finite(), self.name(), "base_lr", "finite", self.base_lr)
    }
    /// Takes `lr` as the base rate and returns the cosine's value at 0 (torch computes it,
    /// which may differ from `lr` in the last bit).
    fn start(&mut self, lr: f64) -> Result<f64> {
        self.base_lr = lr;
        self.validate()?;
        (self.t_i, self.t_cur, self.last_epoch) = (self.t_0, 0, 0);
        Ok(self.lr())
    }
    /// Takes `initial_lr` as the base rate: not chainable, its start sets the rate itself.
    fn start_chained(&mut self, _lr: f64, initial_lr: f64) -> Result<f64> {
        self.start(initial_lr)
    }
    fn advance(&mut self, _lr: f64, _validation: Option<Validation>) -> Result<f64> {
        self.validate()?;
        self.last_epoch += 1;
        self.t_cur += 1;
        if self.t_cur >= self.t_i {
            self.t_cur %= self.t_i;
            self.t_i *= self.t_mult;
        }
        Ok(self.lr())
    }
    state_methods!();
}
