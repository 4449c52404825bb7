//! Learning-rate schedules with torch's semantics: `ReduceLROnPlateau`, `StepLR`,
//! `CosineAnnealingLR`. Each is a small serde struct, so its state goes into checkpoints.
use serde::{Deserialize, Serialize};

/// Whether a lower (loss) or higher (accuracy) monitored value is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    /// Lower is better (torch's `mode="min"`), e.g. a loss.
    Min,
    /// Higher is better (torch's `mode="max"`), e.g. an accuracy.
    Max,
}

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

/// `torch.optim.lr_scheduler.StepLR`: multiply by `gamma` every `step_size` epochs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepLR {
    /// Period of the decay in epochs (at least 1).
    pub step_size: u64,
    /// Multiplicative factor of the decay.
    pub gamma: f64,
    last_epoch: u64,
}

impl StepLR {
    /// `StepLR(optimizer, step_size, gamma)`; a `step_size` of 0 is taken as 1.
    pub fn new(step_size: u64, gamma: f64) -> Self {
        StepLR { step_size: step_size.max(1), gamma, last_epoch: 0 }
    }
    /// Advances one epoch and returns the learning rate to use next.
    pub fn step(&mut self, lr: f64) -> f64 {
        self.last_epoch += 1;
        if self.last_epoch % self.step_size == 0 {
            lr * self.gamma
        } else {
            lr
        }
    }
}

/// `torch.optim.lr_scheduler.CosineAnnealingLR` (torch's recursive form).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CosineAnnealingLR {
    /// Epochs of a half cosine period, from `base_lr` down to `eta_min` (at least 1).
    pub t_max: u64,
    /// The lowest learning rate.
    pub eta_min: f64,
    /// The initial learning rate (the optimizer's when the schedule starts).
    pub base_lr: f64,
    last_epoch: u64,
}

impl CosineAnnealingLR {
    /// `CosineAnnealingLR(optimizer, T_max=t_max, eta_min)` for an optimizer whose initial
    /// learning rate is `base_lr`; a `t_max` of 0 is taken as 1.
    pub fn new(base_lr: f64, t_max: u64, eta_min: f64) -> Self {
        CosineAnnealingLR { t_max: t_max.max(1), eta_min, base_lr, last_epoch: 0 }
    }
    /// Advances one epoch and returns the learning rate to use next.
    pub fn step(&mut self, lr: f64) -> f64 {
        use std::f64::consts::PI;
        self.last_epoch += 1;
        let (e, t) = (self.last_epoch as f64, self.t_max as f64);
        if (self.last_epoch as i64 - 1 - self.t_max as i64).rem_euclid(2 * self.t_max as i64) == 0 {
            lr + (self.base_lr - self.eta_min) * (1.0 - (PI / t).cos()) / 2.0
        } else {
            (1.0 + (PI * e / t).cos()) / (1.0 + (PI * (e - 1.0) / t).cos()) * (lr - self.eta_min)
                + self.eta_min
        }
    }
}
