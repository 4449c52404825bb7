//! Schedules stepped per optimizer step by default: the [`LinearLR`] and [`ConstantLR`] warmups
//! (the [`OneCycleLR`](super::OneCycleLR) policy is in `one_cycle.rs`), and [`Anneal`], the
//! shape of a one-cycle or SWA annealing.
use serde::{Deserialize, Serialize};

use super::{check, from_state, state_methods, to_state, Cadence, LrSchedule, Validation};
use crate::Result;

/// `torch.optim.lr_scheduler.LinearLR`: the rate is multiplied by `start_factor` at the start,
/// and the factor moves linearly to `end_factor` over `total_iters` steps, then stays (torch's
/// chainable form, as `get_last_lr()` gives it). A warmup: per optimizer step by default
/// ([`stepping`](Self::stepping)`(Cadence::Epoch)` for torch's per-epoch use). torch's
/// defaults are `LinearLR::new(1.0 / 3.0, 1.0, 5)`.
///
/// ```
/// use trainbook::train::{LinearLR, LrSchedule};
/// # fn main() -> trainbook::Result<()> {
/// // Warm up from a tenth of 0.1 to 0.1 over 4 optimizer steps.
/// let mut warmup = LinearLR::new(0.1, 1.0, 4);
/// let mut lr = warmup.start(0.1)?;
/// assert!((lr - 0.01).abs() < 1e-15);
/// for _step in 0..4 {
///     lr = warmup.advance(lr, None)?;
/// }
/// assert!((lr - 0.1).abs() < 1e-15);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinearLR {
    /// The factor of the first step, in (0, 1].
    pub start_factor: f64,
    /// The factor reached after `total_iters` steps, in [0, 1].
    pub end_factor: f64,
    /// Steps from `start_factor` to `end_factor`.
    pub total_iters: u64,
    /// Per optimizer step (the default) or per epoch.
    #[serde(default = "per_step")]
    pub cadence: Cadence,
    last_epoch: u64,
}

fn per_step() -> Cadence {
    Cadence::Step
}

impl LinearLR {
    /// `LinearLR(optimizer, start_factor, end_factor, total_iters)`, stepped per optimizer
    /// step. Arguments are checked by [`LrSchedule::validate`] (torch's ranges).
    pub fn new(start_factor: f64, end_factor: f64, total_iters: u64) -> Self {
        LinearLR { start_factor, end_factor, total_iters, cadence: Cadence::Step, last_epoch: 0 }
    }
    /// Steps per optimizer step ([`Cadence::Step`], the default) or per epoch.
    pub fn stepping(mut self, cadence: Cadence) -> Self {
        self.cadence = cadence;
        self
    }
}

impl LrSchedule for LinearLR {
    fn name(&self) -> &'static str {
        "LinearLR"
    }
    fn cadence(&self) -> Cadence {
        self.cadence
    }
    fn validate(&self) -> Result<()> {
        let (s, e) = (self.start_factor, self.end_factor);
        check(s > 0.0 && s <= 1.0, self.name(), "start_factor", "in (0, 1]", s)?;
        check((0.0..=1.0).contains(&e), self.name(), "end_factor", "in [0, 1]", e)
    }
    /// Returns `lr * start_factor`.
    fn start(&mut self, lr: f64) -> Result<f64> {
        self.validate()?;
        self.last_epoch = 0;
        Ok(lr * self.start_factor)
    }
    fn advance(&mut self, lr: f64, _validation: Option<Validation>) -> Result<f64> {
        self.validate()?;
        self.last_epoch += 1;
        if self.last_epoch > self.total_iters {
            return Ok(lr);
        }
        let (s, e) = (self.start_factor, self.end_factor);
        let done = (self.last_epoch - 1) as f64;
        Ok(lr * (1.0 + (e - s) / (self.total_iters as f64 * s + done * (e - s))))
    }
    state_methods!();
}

/// `torch.optim.lr_scheduler.ConstantLR`: the rate is multiplied by `factor` for the first
/// `total_iters` steps, then the base rate comes back (torch's chainable form: times `factor`
/// at the start, times `1 / factor` at step `total_iters`). torchvision's classification
/// reference warms up with it by default (`--lr-warmup-method constant`). Per optimizer step
/// by default, like [`LinearLR`] ([`stepping`](Self::stepping)`(Cadence::Epoch)` for the
/// reference's per-epoch use). torch's defaults are `ConstantLR::new(1.0 / 3.0, 5)`.
///
/// ```
/// use trainbook::train::{ConstantLR, LrSchedule};
/// # fn main() -> trainbook::Result<()> {
/// let mut warmup = ConstantLR::new(0.01, 2); // a hundredth of the rate for 2 steps
/// let mut lr = warmup.start(0.5)?;
/// assert_eq!(lr, 0.5 * 0.01);
/// lr = warmup.advance(lr, None)?;
/// assert_eq!(lr, 0.5 * 0.01);
/// lr = warmup.advance(lr, None)?;
/// assert_eq!(lr, 0.5 * 0.01 * (1.0 / 0.01));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConstantLR {
    /// The factor of the first `total_iters` steps, in [0, 1].
    pub factor: f64,
    /// Steps at the lowered rate.
    pub total_iters: u64,
    /// Per optimizer step (the default) or per epoch.
    #[serde(default = "per_step")]
    pub cadence: Cadence,
    last_epoch: u64,
}

impl ConstantLR {
    /// `ConstantLR(optimizer, factor, total_iters)`, stepped per optimizer step. Arguments are
    /// checked by [`LrSchedule::validate`] (torch's range).
    pub fn new(factor: f64, total_iters: u64) -> Self {
        ConstantLR { factor, total_iters, cadence: Cadence::Step, last_epoch: 0 }
    }
    /// Steps per optimizer step ([`Cadence::Step`], the default) or per epoch.
    pub fn stepping(mut self, cadence: Cadence) -> Self {
        self.cadence = cadence;
        self
    }
}

impl LrSchedule for ConstantLR {
    fn name(&self) -> &'static str {
        "ConstantLR"
    }
    fn cadence(&self) -> Cadence {
        self.cadence
    }
    fn validate(&self) -> Result<()> {
        check((0.0..=1.0).contains(&self.factor), self.name(), "factor", "in [0, 1]", self.factor)
    }
    /// Returns `lr * factor`.
    fn start(&mut self, lr: f64) -> Result<f64> {
        self.validate()?;
        self.last_epoch = 0;
        Ok(lr * self.factor)
    }
    fn advance(&mut self, lr: f64, _validation: Option<Validation>) -> Result<f64> {
        self.validate()?;
        self.last_epoch += 1;
        if self.last_epoch != self.total_iters {
            return Ok(lr);
        }
        Ok(lr * (1.0 / self.factor))
    }
    state_methods!();
}

/// How [`OneCycleLR`](super::OneCycleLR) moves between two rates (torch's `anneal_strategy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Anneal {
    /// Half a cosine (torch's `"cos"`, the default).
    #[default]
    Cos,
    /// A straight line (torch's `"linear"`).
    Linear,
}
