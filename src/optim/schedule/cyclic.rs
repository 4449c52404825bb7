//! [`CyclicLR`], torch's cyclical learning rate (Smith's CLR): the rate goes up and down between
//! two bounds, again and again, and the momentum the other way round.
use serde::{Deserialize, Serialize};

use super::momentum_cycle::{momentum_cycle_setters, MomentumCycle};
use super::{
    check, from_state, group_entry, state_methods, to_state, Cadence, LrSchedule, Validation,
};
use crate::Result;

/// How [`CyclicLR`] scales its cycles (torch's `mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum CyclicMode {
    /// Every cycle spans the whole range (torch's `"triangular"`, its default).
    #[default]
    Triangular,
    /// The range halves from one cycle to the next (`"triangular2"`).
    Triangular2,
    /// The range shrinks by `gamma` every step (`"exp_range"`: `gamma^step`).
    ExpRange,
}

/// `torch.optim.lr_scheduler.CyclicLR`, stepped after every optimizer step: from `base_lr` up
/// to `max_lr` over `step_size_up` steps, back down over `step_size_down` (by default the same),
/// and again, the range scaled by [`CyclicMode`]. [`start`](LrSchedule::start) sets `base_lr`
/// whatever the optimizer's rate was, as torch's constructor does. There is no last step: the
/// cycles go on. torch's defaults: `step_size_up` 2000, `mode` triangular, `gamma` 1.
///
/// The momentum cycles the other way (torch's `cycle_momentum`, on by default): from
/// `max_momentum` (0.9) down to `base_momentum` (0.8) while the rate rises, and back up.
/// [`momentum`](LrSchedule::momentum) gives it; `Trainer::fit` writes it into the optimizer
/// (SGD's and RMSprop's momentum, the beta1 of Adam, AdamW, NAdam, RAdam and Adamax), as for
/// [`OneCycleLR`](super::OneCycleLR).
///
/// Param groups: torch's `base_lr`, `max_lr`, `base_momentum` and `max_momentum` may be lists,
/// one entry per group, and so may [`group_lrs`](Self::group_lrs) and
/// [`group_momentums`](Self::group_momentums) here; `Trainer::fit` gives each group its copy
/// ([`LrSchedule::for_group`]). torch's `scale_fn` (a Python function) has no counterpart: the
/// three modes only.
///
/// ```
/// use trainbook::train::{CyclicLR, CyclicMode, LrSchedule};
/// # fn main() -> trainbook::Result<()> {
/// // CyclicLR(optimizer, base_lr=0.01, max_lr=0.1, step_size_up=4, mode="triangular2")
/// let mut sched = CyclicLR::new(0.01, 0.1, 4).mode(CyclicMode::Triangular2);
/// let mut lrs = vec![sched.start(0.5)?];
/// for _ in 0..16 {
///     lrs.push(sched.advance(*lrs.last().unwrap(), None)?);
/// }
/// assert_eq!(lrs[0], 0.01); // base_lr, whatever the optimizer had
/// assert!((lrs[4] - 0.1).abs() < 1e-12); // the first peak
/// assert!((lrs[12] - 0.055).abs() < 1e-12); // the second, half as high
/// assert_eq!(lrs[16], 0.01); // back at the bottom
/// assert!((sched.momentum().unwrap() - 0.9).abs() < 1e-12); // where the rate is lowest
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CyclicLR {
    /// The lower bound of the rate (finite and >= 0).
    pub base_lr: f64,
    /// The upper bound of the rate (finite and >= 0); reached only where the mode's scale is 1.
    pub max_lr: f64,
    /// One `(base_lr, max_lr)` per param group, in the optimizer's group order (torch's lists),
    /// or `None`: [`base_lr`](Self::base_lr) and [`max_lr`](Self::max_lr) for every group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_lrs: Option<Vec<(f64, f64)>>,
    /// Steps from the bottom to the top of a cycle (at least 1).
    pub step_size_up: u64,
    /// Steps from the top back down (`None`: `step_size_up`, torch's default).
    pub step_size_down: Option<u64>,
    /// How the range scales from cycle to cycle.
    pub mode: CyclicMode,
    /// `exp_range`'s factor per step (finite and > 0).
    pub gamma: f64,
    /// The momentum cycled against the rate (torch's `cycle_momentum`, on from
    /// [`new`](Self::new); `base_momentum` 0.8, `max_momentum` 0.9).
    #[serde(flatten)]
    pub momentum_cycle: MomentumCycle,
    last_epoch: u64,
}

impl CyclicLR {
    /// `CyclicLR(optimizer, base_lr, max_lr, step_size_up)` with torch's other defaults.
    /// Arguments are checked by [`LrSchedule::validate`].
    pub fn new(base_lr: f64, max_lr: f64, step_size_up: u64) -> Self {
        CyclicLR {
            base_lr,
            max_lr,
            group_lrs: None,
            step_size_up,
            step_size_down: None,
            mode: CyclicMode::Triangular,
            gamma: 1.0,
            momentum_cycle: MomentumCycle::new(0.8, 0.9),
            last_epoch: 0,
        }
    }
    /// Sets [`step_size_down`](Self::step_size_down).
    pub fn step_size_down(mut self, steps: u64) -> Self {
        self.step_size_down = Some(steps);
        self
    }
    /// Sets [`mode`](Self::mode).
    pub fn mode(mut self, mode: CyclicMode) -> Self {
        self.mode = mode;
        self
    }
    /// Sets [`gamma`](Self::gamma) (used by [`CyclicMode::ExpRange`]).
    pub fn gamma(mut self, gamma: f64) -> Self {
        self.gamma = gamma;
        self
    }
    /// Sets [`group_lrs`](Self::group_lrs): one `(base_lr, max_lr)` per param group, as torch's
    /// `base_lr=[...], max_lr=[...]`.
    pub fn group_lrs(mut self, bounds: Vec<(f64, f64)>) -> Self {
        self.group_lrs = Some(bounds);
        self
    }
    momentum_cycle_setters!();

    /// The rate after `step` steps (torch's `get_lr()` at `last_epoch == step`).
    pub fn lr_at(&self, step: u64) -> Result<f64> {
        let scale = self.scale_at(step)?;
        Ok(self.base_lr + (self.max_lr - self.base_lr) * scale.0 * scale.1)
    }

    /// The momentum after `step` steps, whether or not it cycles.
    pub fn momentum_at(&self, step: u64) -> Result<f64> {
        let scale = self.scale_at(step)?;
        let (base, max) = (self.momentum_cycle.base_momentum, self.momentum_cycle.max_momentum);
        Ok(max - (max - base) * scale.0 * scale.1)
    }

    /// torch's `scale_factor` (where in the cycle) and `scale_fn`'s value (the mode's scale),
    /// the same operations in the same order.
    fn scale_at(&self, step: u64) -> Result<(f64, f64)> {
        self.validate()?;
        let up = self.step_size_up as f64;
        let total = up + self.step_size_down.map_or(up, |d| d as f64);
        let ratio = up / total;
        let last = step as f64;
        let cycle = (1.0 + last / total).floor();
        let x = 1.0 + last / total - cycle;
        let factor = if x <= ratio { x / ratio } else { (x - 1.0) / (ratio - 1.0) };
        let scale = match self.mode {
            CyclicMode::Triangular => 1.0,
            CyclicMode::Triangular2 => 1.0 / 2f64.powf(cycle - 1.0),
            CyclicMode::ExpRange => self.gamma.powf(last),
        };
        Ok((factor, scale))
    }
}

impl LrSchedule for CyclicLR {
    fn name(&self) -> &'static str {
        "CyclicLR"
    }
    fn cadence(&self) -> Cadence {
        Cadence::Step
    }
    fn validate(&self) -> Result<()> {
        let name = self.name();
        let bound = |x: f64| x >= 0.0 && x.is_finite();
        check(bound(self.base_lr), name, "base_lr", "finite and >= 0", self.base_lr)?;
        check(bound(self.max_lr), name, "max_lr", "finite and >= 0", self.max_lr)?;
        if let Some(lrs) = &self.group_lrs {
            check(!lrs.is_empty(), name, "group_lrs", "one pair per param group", "[]")?;
            for &(base, max) in lrs {
                check(bound(base), name, "group_lrs", "finite base rates >= 0", base)?;
                check(bound(max), name, "group_lrs", "finite top rates >= 0", max)?;
            }
        }
        check(self.step_size_up >= 1, name, "step_size_up", "at least 1", self.step_size_up)?;
        let g = self.gamma;
        check(g > 0.0 && g.is_finite(), name, "gamma", "finite and > 0", g)?;
        self.momentum_cycle.validate(name)
    }
    /// Returns `base_lr`, whatever `lr` is (torch's constructor sets it).
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
        if let Some(lrs) = copy.group_lrs.take() {
            (copy.base_lr, copy.max_lr) =
                group_entry(self.name(), "base_lr and max_lr", "group_lrs", &lrs, (group, groups))?;
        }
        copy.momentum_cycle.for_group(self.name(), group, groups)?;
        Ok(Box::new(copy))
    }
    fn momentum(&self) -> Option<f64> {
        self.momentum_cycle.value(|| self.momentum_at(self.last_epoch))
    }
    state_methods!();
}
