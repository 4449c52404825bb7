//! [`MomentumCycle`]: the momentum that [`OneCycleLR`](super::OneCycleLR) and
//! [`CyclicLR`](super::CyclicLR) move against the rate (torch's `cycle_momentum`,
//! `base_momentum`, `max_momentum`, each bound also as a list, one per param group): its
//! bounds, their checks, each group's copy and the value at a point of the cycle, in one place.
use serde::{Deserialize, Serialize};

use super::{check, group_entry};
use crate::Result;

/// A momentum that cycles against the learning rate: at [`max_momentum`](Self::max_momentum)
/// where the rate is lowest, at [`base_momentum`](Self::base_momentum) where it peaks. Held by
/// [`OneCycleLR`](super::OneCycleLR) (0.85 to 0.95) and [`CyclicLR`](super::CyclicLR) (0.8 to
/// 0.9) as their `momentum_cycle`, set through their builders; in a checkpoint its fields sit
/// beside the schedule's own. A state written before the momentum cycled (no
/// `cycle_momentum`) resumes without it, as it ran.
///
/// ```
/// use trainbook::optim::{CyclicLR, LrSchedule};
/// let sched = CyclicLR::new(0.01, 0.1, 4).base_momentum(0.7).max_momentum(0.95);
/// assert_eq!(sched.momentum_cycle.base_momentum, 0.7);
/// assert_eq!(sched.momentum(), Some(0.95)); // at step 0 the rate is at its lowest
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MomentumCycle {
    /// Whether the momentum cycles against the rate (torch's `cycle_momentum`, on by default;
    /// a state without the field ran without it).
    #[serde(default)]
    pub cycle_momentum: bool,
    /// The momentum where the rate peaks (torch's `base_momentum`; finite and >= 0).
    #[serde(default = "default_base_momentum")]
    pub base_momentum: f64,
    /// The momentum where the rate is lowest (torch's `max_momentum`; finite and >= 0).
    #[serde(default = "default_max_momentum")]
    pub max_momentum: f64,
    /// One `(base_momentum, max_momentum)` per param group (torch's two lists), or `None`:
    /// [`base_momentum`](Self::base_momentum) and [`max_momentum`](Self::max_momentum) for
    /// every group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_momentums: Option<Vec<(f64, f64)>>,
}

/// OneCycleLR's bounds, which a state written before the momentum cycled lacks.
fn default_base_momentum() -> f64 {
    0.85
}

fn default_max_momentum() -> f64 {
    0.95
}

impl MomentumCycle {
    /// A cycle on, between `base_momentum` and `max_momentum`, the same for every group.
    pub(crate) fn new(base_momentum: f64, max_momentum: f64) -> MomentumCycle {
        MomentumCycle { cycle_momentum: true, base_momentum, max_momentum, group_momentums: None }
    }

    /// Checks the two bounds and each pair of the per-group list: finite and >= 0, and a list
    /// not empty ([`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `schedule`
    /// and the field).
    pub(crate) fn validate(&self, schedule: &str) -> Result<()> {
        let ok = |m: f64| m >= 0.0 && m.is_finite();
        for (param, m) in
            [("base_momentum", self.base_momentum), ("max_momentum", self.max_momentum)]
        {
            check(ok(m), schedule, param, "finite and >= 0", m)?;
        }
        let Some(list) = &self.group_momentums else { return Ok(()) };
        check(!list.is_empty(), schedule, "group_momentums", "one pair per param group", "[]")?;
        for &(b, m) in list {
            let pair = format!("({b}, {m})");
            check(ok(b) && ok(m), schedule, "group_momentums", "finite and >= 0", pair)?;
        }
        Ok(())
    }

    /// Param group `group`'s own bounds (of `groups`), from the per-group list when there is
    /// one (a list of another length is refused as torch refuses it).
    pub(crate) fn for_group(&mut self, schedule: &str, group: usize, groups: usize) -> Result<()> {
        if let Some(ranges) = self.group_momentums.take() {
            let params = "base_momentum and max_momentum";
            (self.base_momentum, self.max_momentum) =
                group_entry(schedule, params, "group_momentums", &ranges, (group, groups))?;
        }
        Ok(())
    }

    /// The momentum to write when the cycle is on: `at()`, the schedule's own formula at its
    /// current step.
    pub(crate) fn value(&self, at: impl FnOnce() -> Result<f64>) -> Option<f64> {
        self.cycle_momentum.then(|| at().ok()).flatten()
    }
}

/// The four builders of a schedule that holds a `momentum_cycle` (torch's keyword arguments).
macro_rules! momentum_cycle_setters {
    () => {
        /// Sets [`MomentumCycle::cycle_momentum`] (torch's `cycle_momentum=False` is
        /// `cycle_momentum(false)`, needed for an optimizer without a momentum).
        pub fn cycle_momentum(mut self, on: bool) -> Self {
            self.momentum_cycle.cycle_momentum = on;
            self
        }
        /// Sets [`MomentumCycle::base_momentum`].
        pub fn base_momentum(mut self, m: f64) -> Self {
            self.momentum_cycle.base_momentum = m;
            self
        }
        /// Sets [`MomentumCycle::max_momentum`].
        pub fn max_momentum(mut self, m: f64) -> Self {
            self.momentum_cycle.max_momentum = m;
            self
        }
        /// Sets [`MomentumCycle::group_momentums`]: one `(base_momentum, max_momentum)` per
        /// param group, as torch's `base_momentum=[...], max_momentum=[...]`.
        pub fn group_momentums(mut self, ranges: Vec<(f64, f64)>) -> Self {
            self.momentum_cycle.group_momentums = Some(ranges);
            self
        }
    };
}
pub(super) use momentum_cycle_setters;
