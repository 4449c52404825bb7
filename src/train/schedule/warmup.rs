//! Schedules stepped per optimizer step by default: the [`LinearLR`] and [`ConstantLR`] warmups and the
//! [`OneCycleLR`] policy.
use serde::{Deserialize, Serialize};

use super::{check, from_state, state_methods, to_state, Cadence, LrSchedule, Validation};
use crate::{Error, Result};

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

/// How [`OneCycleLR`] moves between two rates (torch's `anneal_strategy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Anneal {
    /// Half a cosine (torch's `"cos"`, the default).
    #[default]
    Cos,
    /// A straight line (torch's `"linear"`).
    Linear,
}

/// `torch.optim.lr_scheduler.OneCycleLR`, stepped after every optimizer step: from
/// `max_lr / div_factor` up to `max_lr` over the first `pct_start` of `total_steps`, then down
/// to `max_lr / div_factor / final_div_factor` (with `three_phase`: up, back down to the
/// initial rate, then to the minimum). [`start`](LrSchedule::start) sets the initial rate
/// whatever the optimizer's was, as torch does. torch's defaults: `pct_start` 0.3, cosine
/// annealing, `div_factor` 25, `final_div_factor` 1e4, two phases.
///
/// Only the learning rate is scheduled: torch's momentum cycling (`cycle_momentum`, which
/// moves SGD's momentum or Adam's beta1 between 0.95 and 0.85) is left out, so the run
/// equals torch's with `cycle_momentum=False`. Stepping more than `total_steps` times is an
/// [`Error::InvalidArgument`], as it is a `ValueError` in torch.
///
/// ```
/// use trainbook::train::{LrSchedule, OneCycleLR};
/// # fn main() -> trainbook::Result<()> {
/// let mut sched = OneCycleLR::new(0.1, 100); // OneCycleLR(optimizer, max_lr=0.1, total_steps=100)
/// let mut lr = sched.start(0.1)?;
/// assert!((lr - 0.1 / 25.0).abs() < 1e-15); // torch: 0.0040000000000000036
/// for _step in 0..29 {
///     lr = sched.advance(lr, None)?;
/// }
/// assert!((lr - 0.1).abs() < 1e-12); // the peak, after 30% of the steps
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OneCycleLR {
    /// The peak learning rate (> 0).
    pub max_lr: f64,
    /// Steps in the cycle (at least 1; torch's `epochs * steps_per_epoch` when given so).
    pub total_steps: u64,
    /// Fraction of the cycle spent increasing the rate, in [0, 1].
    pub pct_start: f64,
    /// Cosine or linear annealing.
    pub anneal_strategy: Anneal,
    /// The initial rate is `max_lr / div_factor` (> 0).
    pub div_factor: f64,
    /// The final rate is the initial one divided by this (> 0).
    pub final_div_factor: f64,
    /// Three phases (up, down to the initial rate, down to the minimum) instead of two.
    pub three_phase: bool,
    last_epoch: u64,
}

impl OneCycleLR {
    /// `OneCycleLR(optimizer, max_lr, total_steps)` with torch's other defaults. Arguments
    /// are checked by [`LrSchedule::validate`]: `total_steps` 0, for one, is an
    /// [`Error::InvalidArgument`].
    pub fn new(max_lr: f64, total_steps: u64) -> Self {
        OneCycleLR {
            max_lr,
            total_steps,
            pct_start: 0.3,
            anneal_strategy: Anneal::Cos,
            div_factor: 25.0,
            final_div_factor: 1e4,
            three_phase: false,
            last_epoch: 0,
        }
    }
    /// Sets [`pct_start`](Self::pct_start).
    pub fn pct_start(mut self, pct: f64) -> Self {
        self.pct_start = pct;
        self
    }
    /// Sets [`anneal_strategy`](Self::anneal_strategy).
    pub fn anneal_strategy(mut self, anneal: Anneal) -> Self {
        self.anneal_strategy = anneal;
        self
    }
    /// Sets [`div_factor`](Self::div_factor).
    pub fn div_factor(mut self, f: f64) -> Self {
        self.div_factor = f;
        self
    }
    /// Sets [`final_div_factor`](Self::final_div_factor).
    pub fn final_div_factor(mut self, f: f64) -> Self {
        self.final_div_factor = f;
        self
    }
    /// Sets [`three_phase`](Self::three_phase).
    pub fn three_phase(mut self, on: bool) -> Self {
        self.three_phase = on;
        self
    }

    /// The rate after `step` steps (torch's `get_lr()` at `last_epoch == step`).
    pub fn lr_at(&self, step: u64) -> Result<f64> {
        self.validate()?;
        if step > self.total_steps {
            return Err(Error::InvalidArgument(format!(
                "OneCycleLR: tried to step {step} times; total_steps is {}",
                self.total_steps
            )));
        }
        let initial = self.max_lr / self.div_factor;
        let min_lr = initial / self.final_div_factor;
        let (t, pct) = (self.total_steps as f64, self.pct_start);
        let last = t - 1.0;
        let phases: &[(f64, f64, f64)] = if self.three_phase {
            &[
                (pct * t - 1.0, initial, self.max_lr),
                (2.0 * pct * t - 2.0, self.max_lr, initial),
                (last, initial, min_lr),
            ]
        } else {
            &[(pct * t - 1.0, initial, self.max_lr), (last, self.max_lr, min_lr)]
        };
        let x = step as f64;
        let mut start_step = 0.0;
        for (i, &(end_step, from, to)) in phases.iter().enumerate() {
            if x <= end_step || i == phases.len() - 1 {
                if end_step == start_step {
                    return Err(Error::InvalidArgument(format!(
                        "OneCycleLR: a phase of zero steps ends at step {end_step} (pct_start \
                         {pct} of total_steps {t}); torch divides by zero there"
                    )));
                }
                let p = (x - start_step) / (end_step - start_step);
                return Ok(match self.anneal_strategy {
                    Anneal::Cos => {
                        to + (from - to) / 2.0 * ((std::f64::consts::PI * p).cos() + 1.0)
                    }
                    Anneal::Linear => (to - from) * p + from,
                });
            }
            start_step = end_step;
        }
        // Not reached: the last phase always matches.
        Err(Error::InvalidArgument(format!("OneCycleLR: no phase holds step {step}")))
    }
}

impl LrSchedule for OneCycleLR {
    fn name(&self) -> &'static str {
        "OneCycleLR"
    }
    fn cadence(&self) -> Cadence {
        Cadence::Step
    }
    fn validate(&self) -> Result<()> {
        let name = self.name();
        check(self.total_steps >= 1, name, "total_steps", "a positive integer", self.total_steps)?;
        check(
            self.max_lr > 0.0 && self.max_lr.is_finite(),
            name,
            "max_lr",
            "finite and > 0",
            self.max_lr,
        )?;
        check(
            (0.0..=1.0).contains(&self.pct_start),
            name,
            "pct_start",
            "in [0, 1]",
            self.pct_start,
        )?;
        check(
            self.div_factor > 0.0 && self.div_factor.is_finite(),
            name,
            "div_factor",
            "finite and > 0",
            self.div_factor,
        )?;
        let f = self.final_div_factor;
        check(f > 0.0 && f.is_finite(), name, "final_div_factor", "finite and > 0", f)
    }
    /// Returns the rate of step 0, `max_lr / div_factor` (as torch computes it, which may
    /// differ in the last bits), whatever `lr` is.
    fn start(&mut self, _lr: f64) -> Result<f64> {
        let lr = self.lr_at(0)?;
        self.last_epoch = 0;
        Ok(lr)
    }
    fn advance(&mut self, _lr: f64, _validation: Option<Validation>) -> Result<f64> {
        let lr = self.lr_at(self.last_epoch + 1)?;
        self.last_epoch += 1;
        Ok(lr)
    }
    state_methods!();
}
