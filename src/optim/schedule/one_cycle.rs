//! [`OneCycleLR`], torch's one-cycle policy: the learning rate up then down over a fixed number of
//! optimizer steps, and the momentum (SGD's, or Adam's beta1) the other way round.
use serde::{Deserialize, Serialize};

use super::momentum_cycle::{momentum_cycle_setters, MomentumCycle};
use super::{
    check, from_state, group_entry, state_methods, to_state, Anneal, Cadence, LrSchedule,
    Validation,
};
use crate::{Error, Result};

/// `torch.optim.lr_scheduler.OneCycleLR`, stepped after every optimizer step: from
/// `max_lr / div_factor` up to `max_lr` over the first `pct_start` of `total_steps`, then down
/// to `max_lr / div_factor / final_div_factor` (with `three_phase`: up, back down to the
/// initial rate, then to the minimum). [`start`](LrSchedule::start) sets the initial rate
/// whatever the optimizer's was, as torch does. torch's defaults: `pct_start` 0.3, cosine
/// annealing, `div_factor` 25, `final_div_factor` 1e4, two phases.
///
/// The momentum cycles the other way (torch's `cycle_momentum`, on by default): from
/// `max_momentum` (0.95) down to `base_momentum` (0.85) while the rate rises, and back up while
/// it falls (with `three_phase`, it stays at `max_momentum` in the last phase).
/// [`momentum`](LrSchedule::momentum) gives it after every [`start`](LrSchedule::start) and
/// [`advance`](LrSchedule::advance), and [`Optimizer::set_momentum`] writes it where torch does:
/// SGD's and RMSprop's momentum, the beta1 of Adam, AdamW, NAdam, RAdam and Adamax. `Trainer::fit` does
/// both; an optimizer without a momentum (an [`UpdateRule`](crate::train::UpdateRule) of one's
/// own without [`with_momentum`](crate::train::UpdateRule::with_momentum)) is an error there, as
/// in torch, unless [`cycle_momentum`](Self::cycle_momentum)`(false)`. A checkpoint written
/// before the momentum cycled resumes without it, as it ran.
///
/// Param groups: torch's `max_lr`, `base_momentum` and `max_momentum` may be lists, one entry
/// per group, and so may [`group_max_lrs`](Self::group_max_lrs) and
/// [`group_momentums`](Self::group_momentums) here; `Trainer::fit` gives each group its copy of
/// the schedule ([`LrSchedule::for_group`]) and writes each group's momentum
/// ([`Optimizer::set_group_momentums`](crate::train::Optimizer::set_group_momentums)).
///
/// Stepping more than `total_steps` times is an [`Error::InvalidArgument`], as it is a
/// `ValueError` in torch.
///
/// ```
/// use tch::nn::VarStore;
/// use trainbook::train::{LrSchedule, OneCycleLR, Optimizer};
/// # fn main() -> trainbook::Result<()> {
/// let vs = VarStore::new(tch::Device::Cpu);
/// let _w = vs.root().zeros("w", &[4]);
/// let mut opt = Optimizer::sgd(&vs, 0.1, 0.9);
/// // OneCycleLR(optimizer, max_lr=0.1, total_steps=100)
/// let mut sched = OneCycleLR::new(0.1, 100);
/// let mut lr = sched.start(opt.lr())?;
/// assert!((lr - 0.1 / 25.0).abs() < 1e-15); // torch: 0.0040000000000000036
/// for step in 0..30 {
///     // What torch's constructor, then each scheduler.step(), writes into the param groups.
///     opt.set_lr(lr);
///     if let Some(m) = sched.momentum() {
///         opt.set_momentum(m)?;
///     }
///     if step < 29 {
///         // opt.step()? here, then:
///         lr = sched.advance(lr, None)?;
///     }
/// }
/// assert!((lr - 0.1).abs() < 1e-12); // the peak, after 30% of the steps
/// assert!((opt.momentum().unwrap() - 0.85).abs() < 1e-12); // the lowest momentum
/// # Ok(()) }
/// ```
///
/// [`Optimizer::set_momentum`]: crate::train::Optimizer::set_momentum
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OneCycleLR {
    /// The peak learning rate (> 0).
    pub max_lr: f64,
    /// One peak per param group, in the optimizer's group order (torch's `max_lr` as a list),
    /// or `None`: [`max_lr`](Self::max_lr) for every group. Each entry finite and > 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_max_lrs: Option<Vec<f64>>,
    /// Steps in the cycle (at least 1; torch's `epochs * steps_per_epoch` when given so:
    /// [`with_epochs`](Self::with_epochs)).
    pub total_steps: u64,
    /// Fraction of the cycle spent increasing the rate, in [0, 1].
    pub pct_start: f64,
    /// Cosine or linear annealing (of the rate and of the momentum).
    pub anneal_strategy: Anneal,
    /// The initial rate is `max_lr / div_factor` (> 0).
    pub div_factor: f64,
    /// The final rate is the initial one divided by this (> 0).
    pub final_div_factor: f64,
    /// Three phases (up, down to the initial rate, down to the minimum) instead of two.
    pub three_phase: bool,
    /// The momentum cycled against the rate (torch's `cycle_momentum`, on from
    /// [`new`](Self::new); `base_momentum` 0.85, `max_momentum` 0.95).
    #[serde(flatten)]
    pub momentum_cycle: MomentumCycle,
    last_epoch: u64,
}

impl OneCycleLR {
    /// `OneCycleLR(optimizer, max_lr, total_steps)` with torch's other defaults. Arguments
    /// are checked by [`LrSchedule::validate`]: `total_steps` 0, for one, is an
    /// [`Error::InvalidArgument`].
    pub fn new(max_lr: f64, total_steps: u64) -> Self {
        OneCycleLR {
            max_lr,
            group_max_lrs: None,
            total_steps,
            pct_start: 0.3,
            anneal_strategy: Anneal::Cos,
            div_factor: 25.0,
            final_div_factor: 1e4,
            three_phase: false,
            momentum_cycle: MomentumCycle::new(0.85, 0.95),
            last_epoch: 0,
        }
    }
    /// `OneCycleLR(optimizer, max_lr, epochs=epochs, steps_per_epoch=steps_per_epoch)`: a
    /// cycle of `epochs * steps_per_epoch` optimizer steps. Either being 0 is an
    /// [`Error::InvalidArgument`] naming it, as torch's `ValueError`.
    ///
    /// ```
    /// use trainbook::train::OneCycleLR;
    /// // 10 epochs of 469 batches (MNIST's 60000 images at batch 128).
    /// let sched = OneCycleLR::with_epochs(0.1, 10, 469)?;
    /// assert_eq!(sched.total_steps, 4690);
    /// assert!(OneCycleLR::with_epochs(0.1, 0, 469).unwrap_err().to_string().contains("epochs"));
    /// # Ok::<(), trainbook::Error>(())
    /// ```
    pub fn with_epochs(max_lr: f64, epochs: u64, steps_per_epoch: u64) -> Result<Self> {
        let name = "OneCycleLR";
        check(epochs >= 1, name, "epochs", "a positive integer", epochs)?;
        check(
            steps_per_epoch >= 1,
            name,
            "steps_per_epoch",
            "a positive integer",
            steps_per_epoch,
        )?;
        let total = epochs.checked_mul(steps_per_epoch).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "OneCycleLR: epochs * steps_per_epoch ({epochs} * {steps_per_epoch}) overflows"
            ))
        })?;
        Ok(Self::new(max_lr, total))
    }
    /// Sets [`group_max_lrs`](Self::group_max_lrs): one peak per param group, as torch's
    /// `max_lr=[...]`.
    ///
    /// ```
    /// use trainbook::train::{LrSchedule, OneCycleLR};
    /// // OneCycleLR(optimizer, max_lr=[0.01, 0.1], total_steps=100) on two param groups
    /// let sched = OneCycleLR::new(0.1, 100).group_max_lrs(vec![0.01, 0.1]);
    /// let mut head = sched.for_group(1, 2)?;
    /// assert!((head.start(0.0)? - 0.1 / 25.0).abs() < 1e-15);
    /// assert!(sched.for_group(0, 3).is_err()); // three groups, two peaks
    /// # Ok::<(), trainbook::Error>(())
    /// ```
    pub fn group_max_lrs(mut self, max_lrs: Vec<f64>) -> Self {
        self.group_max_lrs = Some(max_lrs);
        self
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
    momentum_cycle_setters!();

    /// The rate after `step` steps (torch's `get_lr()` at `last_epoch == step`).
    pub fn lr_at(&self, step: u64) -> Result<f64> {
        let (phase, pct) = self.phase_at(step)?;
        let initial = self.max_lr / self.div_factor;
        let min_lr = initial / self.final_div_factor;
        let (from, to) = match (self.three_phase, phase) {
            (_, 0) => (initial, self.max_lr),
            (false, _) => (self.max_lr, min_lr),
            (true, 1) => (self.max_lr, initial),
            (true, _) => (initial, min_lr),
        };
        Ok(self.anneal(from, to, pct))
    }

    /// The momentum after `step` steps, whether or not it cycles (the value torch's `get_lr()`
    /// writes into the param groups at `last_epoch == step`).
    pub fn momentum_at(&self, step: u64) -> Result<f64> {
        let (phase, pct) = self.phase_at(step)?;
        let (base, max) = (self.momentum_cycle.base_momentum, self.momentum_cycle.max_momentum);
        let (from, to) = match (self.three_phase, phase) {
            (_, 0) => (max, base),
            (false, _) | (true, 1) => (base, max),
            (true, _) => (max, max),
        };
        Ok(self.anneal(from, to, pct))
    }

    /// torch's `_annealing_cos` and `_annealing_linear`, the same operations in the same order.
    fn anneal(&self, from: f64, to: f64, pct: f64) -> f64 {
        match self.anneal_strategy {
            Anneal::Cos => to + (from - to) / 2.0 * ((std::f64::consts::PI * pct).cos() + 1.0),
            Anneal::Linear => (to - from) * pct + from,
        }
    }

    /// The phase that step `step` is in, and how far into it (torch's `pct`).
    fn phase_at(&self, step: u64) -> Result<(usize, f64)> {
        self.validate()?;
        if step > self.total_steps {
            return Err(Error::InvalidArgument(format!(
                "OneCycleLR: tried to step {step} times; total_steps is {}",
                self.total_steps
            )));
        }
        let (t, pct) = (self.total_steps as f64, self.pct_start);
        let ends: &[f64] = if self.three_phase {
            &[pct * t - 1.0, 2.0 * pct * t - 2.0, t - 1.0]
        } else {
            &[pct * t - 1.0, t - 1.0]
        };
        let x = step as f64;
        let mut start_step = 0.0;
        for (i, &end_step) in ends.iter().enumerate() {
            if x <= end_step || i == ends.len() - 1 {
                if end_step == start_step {
                    return Err(Error::InvalidArgument(format!(
                        "OneCycleLR: a phase of zero steps ends at step {end_step} (pct_start \
                         {pct} of total_steps {t}); torch divides by zero there"
                    )));
                }
                return Ok((i, (x - start_step) / (end_step - start_step)));
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
        let positive = |x: f64| x > 0.0 && x.is_finite();
        check(positive(self.max_lr), name, "max_lr", "finite and > 0", self.max_lr)?;
        if let Some(lrs) = &self.group_max_lrs {
            check(!lrs.is_empty(), name, "group_max_lrs", "one value per param group", "[]")?;
            for &lr in lrs {
                check(positive(lr), name, "group_max_lrs", "finite and > 0", lr)?;
            }
        }
        let pct = self.pct_start;
        check((0.0..=1.0).contains(&pct), name, "pct_start", "in [0, 1]", pct)?;
        check(positive(self.div_factor), name, "div_factor", "finite and > 0", self.div_factor)?;
        let f = self.final_div_factor;
        check(positive(f), name, "final_div_factor", "finite and > 0", f)?;
        self.momentum_cycle.validate(name)
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
    fn for_group(&self, group: usize, groups: usize) -> Result<Box<dyn LrSchedule>> {
        self.validate()?;
        let mut copy = self.clone();
        if let Some(lrs) = copy.group_max_lrs.take() {
            copy.max_lr =
                group_entry(self.name(), "max_lr", "group_max_lrs", &lrs, (group, groups))?;
        }
        copy.momentum_cycle.for_group(self.name(), group, groups)?;
        Ok(Box::new(copy))
    }
    fn momentum(&self) -> Option<f64> {
        self.momentum_cycle.value(|| self.momentum_at(self.last_epoch))
    }
    state_methods!();
}
