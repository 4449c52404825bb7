//! [`ReduceLROnPlateau`], which watches a metric in a [`Mode`](crate::train::Mode).
use serde::{Deserialize, Serialize};

use super::Mode;
use super::{check, from_state, state_methods, to_state, Cadence, LrSchedule, Validation};
use crate::{Error, Result};

/// `torch.optim.lr_scheduler.ReduceLROnPlateau` (threshold_mode "rel" by default): multiplies
/// the learning rate by `factor` once the monitored metric has not improved for more than
/// `patience` epochs. Call [`step`](Self::step) once per epoch with the metric and the current
/// learning rate, and set the rate it returns.
///
/// ```
/// use trainbook::train::{Mode, ReduceLROnPlateau};
/// let mut sched = ReduceLROnPlateau::new(Mode::Max).patience(1).factor(0.5);
/// let mut lr = 0.1;
/// for val_acc in [0.50, 0.60, 0.60, 0.60] {
///     lr = sched.step(val_acc, lr); // optimizer.set_lr(lr)
/// }
/// assert_eq!(lr, 0.05);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReduceLROnPlateau {
    /// Whether lower ([`Mode::Min`]) or higher ([`Mode::Max`]) metrics are better.
    pub mode: Mode,
    /// Factor applied to the learning rate on a plateau (default 0.1).
    pub factor: f64,
    /// Epochs without improvement tolerated before reducing (default 10).
    pub patience: u64,
    /// Minimum improvement that counts (default 1e-4), relative or absolute per
    /// `relative_threshold`.
    pub threshold: f64,
    /// `true`: torch's `threshold_mode="rel"` (improve by a factor `1 ± threshold`, the
    /// default); `false`: `"abs"` (improve by `threshold`).
    pub relative_threshold: bool,
    /// Epochs to wait after a reduction before counting bad epochs again (default 0).
    pub cooldown: u64,
    /// Lower bound of the learning rate (default 0).
    pub min_lr: f64,
    /// Reductions smaller than this are skipped (default 1e-8).
    pub eps: f64,
    best: Option<f64>,
    num_bad_epochs: u64,
    cooldown_counter: u64,
    last_epoch: u64,
}

impl ReduceLROnPlateau {
    /// torch's defaults: factor 0.1, patience 10, threshold 1e-4 (relative), cooldown 0, min_lr 0.
    pub fn new(mode: Mode) -> Self {
        ReduceLROnPlateau {
            mode,
            factor: 0.1,
            patience: 10,
            threshold: 1e-4,
            relative_threshold: true,
            cooldown: 0,
            min_lr: 0.0,
            eps: 1e-8,
            best: None,
            num_bad_epochs: 0,
            cooldown_counter: 0,
            last_epoch: 0,
        }
    }
    /// Sets [`factor`](Self::factor) (torch's `factor`).
    pub fn factor(mut self, f: f64) -> Self {
        self.factor = f;
        self
    }
    /// Sets [`patience`](Self::patience) in epochs (torch's `patience`).
    pub fn patience(mut self, p: u64) -> Self {
        self.patience = p;
        self
    }
    /// Sets the threshold and whether it is relative (torch's `threshold` and
    /// `threshold_mode`, `"rel"` when `relative`).
    pub fn threshold(mut self, t: f64, relative: bool) -> Self {
        self.threshold = t;
        self.relative_threshold = relative;
        self
    }
    /// Sets [`cooldown`](Self::cooldown) in epochs (torch's `cooldown`).
    pub fn cooldown(mut self, c: u64) -> Self {
        self.cooldown = c;
        self
    }
    /// Sets [`min_lr`](Self::min_lr) (torch's `min_lr`).
    pub fn min_lr(mut self, m: f64) -> Self {
        self.min_lr = m;
        self
    }

    fn is_better(&self, a: f64, best: f64) -> bool {
        match (self.mode, self.relative_threshold) {
            (Mode::Min, true) => a < best * (1.0 - self.threshold),
            (Mode::Min, false) => a < best - self.threshold,
            (Mode::Max, true) => a > best * (self.threshold + 1.0),
            (Mode::Max, false) => a > best + self.threshold,
        }
    }

    /// Records this epoch's metric and returns the learning rate to use next.
    pub fn step(&mut self, metric: f64, lr: f64) -> f64 {
        self.last_epoch += 1;
        let initial = match self.mode {
            Mode::Min => f64::INFINITY,
            Mode::Max => f64::NEG_INFINITY,
        };
        if self.is_better(metric, self.best.unwrap_or(initial)) {
            self.best = Some(metric);
            self.num_bad_epochs = 0;
        } else {
            self.num_bad_epochs += 1;
        }
        if self.cooldown_counter > 0 {
            self.cooldown_counter -= 1;
            self.num_bad_epochs = 0;
        }
        if self.num_bad_epochs > self.patience {
            self.cooldown_counter = self.cooldown;
            self.num_bad_epochs = 0;
            let new_lr = (lr * self.factor).max(self.min_lr);
            if lr - new_lr > self.eps {
                return new_lr;
            }
        }
        lr
    }

    /// Best metric seen so far (torch's `best`); `None` before the first step.
    pub fn best(&self) -> Option<f64> {
        self.best
    }
}

impl LrSchedule for ReduceLROnPlateau {
    fn name(&self) -> &'static str {
        "ReduceLROnPlateau"
    }
    fn cadence(&self) -> Cadence {
        Cadence::Epoch
    }
    fn validate(&self) -> Result<()> {
        let name = self.name();
        check((0.0..1.0).contains(&self.factor), name, "factor", "in [0, 1)", self.factor)?;
        check(
            self.threshold >= 0.0 && self.threshold.is_finite(),
            name,
            "threshold",
            "finite and >= 0",
            self.threshold,
        )?;
        check(
            self.min_lr >= 0.0 && self.min_lr.is_finite(),
            name,
            "min_lr",
            "finite and >= 0",
            self.min_lr,
        )?;
        check(self.eps >= 0.0 && self.eps.is_finite(), name, "eps", "finite and >= 0", self.eps)
    }
    /// Forgets the metrics seen (torch's constructor); the rate stays `lr`.
    fn start(&mut self, lr: f64) -> Result<f64> {
        self.validate()?;
        (self.best, self.num_bad_epochs, self.cooldown_counter, self.last_epoch) = (None, 0, 0, 0);
        Ok(lr)
    }
    /// [`step`](ReduceLROnPlateau::step) with the run's monitored metric, else the validation
    /// loss ([`Mode::Min`]) or accuracy ([`Mode::Max`]); without `validation`, [`Error::InvalidArgument`].
    fn advance(&mut self, lr: f64, validation: Option<Validation>) -> Result<f64> {
        self.validate()?;
        let v = validation.ok_or_else(|| {
            Error::InvalidArgument(
                "ReduceLROnPlateau steps on a validation metric: advance needs Some(Validation)"
                    .into(),
            )
        })?;
        let metric = match (v.monitored, self.mode) {
            (Some(m), _) => m,
            (None, Mode::Min) => v.loss,
            (None, Mode::Max) => v.accuracy,
        };
        Ok(self.step(metric, lr))
    }
    state_methods!();
}
