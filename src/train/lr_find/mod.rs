//! The learning-rate range test (fastai's `lr_find`): train from the current weights with a
//! rate that grows exponentially from `start_lr` to `end_lr` over `num_it` optimizer steps,
//! record the smoothed loss at each rate, stop early once it diverges, put the model, the
//! optimizer and the random generator back as they were, and suggest a rate: fastai's `valley`,
//! a rate two thirds of the way down the longest stretch where the loss keeps falling.
//!
//! fastai's definitions, kept: the rate of step `t` is `start * (end / start) ^ (t / num_it)`
//! (`SchedExp`); the smoothed loss is an exponential moving average with `beta = 0.98`,
//! debiased (`AvgSmoothLoss`), in float32 as fastai's tensors hold it; the test stops after a
//! step whose smoothed loss is above 4 times the best so far (`stop_div`) or after `num_it`
//! steps (at least 6); the suggestion looks at the points from `num_it / 10` to the fifth
//! from the end, cut at the first NaN. On several ranks each step's loss is the mean of the
//! ranks' (so every rank records the same curve and stops at the same step).
mod range_test;
mod valley;

pub use range_test::{lr_find, lr_find_step};
pub use valley::valley;

use tch::{Kind, Tensor};

/// The settings of a range test (fastai's `lr_find` arguments, with its defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LrFindOptions {
    /// The first step's rate. Default 1e-7.
    pub start_lr: f64,
    /// The rate the test reaches at step `num_it`. Default 10.
    pub end_lr: f64,
    /// Optimizer steps at most (at least 6). Default 100.
    pub num_it: usize,
    /// Stop once the smoothed loss exceeds 4 times its best. Default `true`.
    pub stop_div: bool,
}

impl Default for LrFindOptions {
    fn default() -> Self {
        LrFindOptions { start_lr: 1e-7, end_lr: 10.0, num_it: 100, stop_div: true }
    }
}

impl LrFindOptions {
    /// The rate of step `t` (0-based): `start * (end / start) ^ (t / num_it)`.
    pub fn lr_at(&self, t: usize) -> f64 {
        let pos = t as f64 / self.num_it() as f64;
        self.start_lr * (self.end_lr / self.start_lr).powf(pos)
    }
    /// `num_it`, raised to fastai's minimum of 6.
    pub fn num_it(&self) -> usize {
        self.num_it.max(6)
    }
    pub(crate) fn validate(&self) -> crate::Result<()> {
        let ok = self.start_lr > 0.0 && self.end_lr > 0.0;
        if !(ok && self.start_lr.is_finite() && self.end_lr.is_finite()) {
            return Err(crate::Error::InvalidArgument(format!(
                "lr_find: start_lr {} and end_lr {} must be positive and finite",
                self.start_lr, self.end_lr
            )));
        }
        Ok(())
    }
}

/// What a range test recorded, and its suggestion.
#[derive(Clone, Debug, PartialEq)]
pub struct LrFind {
    /// The rate of every step taken.
    pub lrs: Vec<f64>,
    /// Every step's loss (the mean over the ranks of each rank's batch mean).
    pub raw_losses: Vec<f64>,
    /// Every step's smoothed loss (float32 values).
    pub losses: Vec<f64>,
    /// fastai's `valley` suggestion: the rate, and its point on the curve; `None` when too
    /// few steps were taken (fewer than `num_it / 10 + 6`).
    pub suggestion: Option<(f64, f64)>,
}

impl LrFind {
    /// The points the suggestion looks at: from `num_it / 10` to the fifth from the end, up to
    /// the first NaN loss.
    pub fn considered(&self, num_it: usize) -> (&[f64], &[f64]) {
        let from = num_it / 10;
        let to = self.losses.len().saturating_sub(5).max(from);
        let mut losses = self.losses.get(from..to).unwrap_or_default();
        if let Some(nan) = losses.iter().position(|l| l.is_nan()) {
            losses = &losses[..nan];
        }
        (&self.lrs[from..from + losses.len()], losses)
    }
}

/// fastai's `AvgSmoothLoss(beta=0.98)`: a moving average kept in float32 (`torch.lerp`), divided
/// by `1 - beta^count`.
pub(crate) struct Smoother {
    average: Tensor,
    count: u32,
}

impl Smoother {
    const BETA: f64 = 0.98;

    pub fn new() -> Smoother {
        Smoother { average: Tensor::zeros([], (Kind::Float, tch::Device::Cpu)), count: 0 }
    }

    /// Adds `loss`; the smoothed value so far.
    pub fn add(&mut self, loss: f64) -> f64 {
        self.count += 1;
        let loss = Tensor::from(loss as f32);
        self.average = loss.lerp(&self.average, Smoother::BETA);
        let debias = 1.0 - Smoother::BETA.powf(f64::from(self.count));
        (&self.average / debias).double_value(&[])
    }
}
