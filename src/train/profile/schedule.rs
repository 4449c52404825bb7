//! When the profiler records: torch's `torch.profiler.schedule` (skip the first steps, then
//! cycles of wait, warm-up and active steps, `repeat` times or until the end) and its actions.
use crate::{Error, Result};

/// What the profiler does during a step (torch's `torch.profiler.ProfilerAction`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProfilerAction {
    /// Not profiling.
    None,
    /// Set up, recording nothing yet (the first steps of a trace are skewed by the set-up).
    Warmup,
    /// Recording.
    Record,
    /// Recording the cycle's last active step; the trace is saved after it.
    RecordAndSave,
}

/// The steps a [`Profiler`](super::Profiler) records, with `torch.profiler.schedule`'s names
/// and semantics: skip the first `skip_first` steps, then repeat a cycle of `wait` steps doing
/// nothing, `warmup` steps set up but not recorded, and `active` steps recorded (one trace file
/// per cycle), `repeat` times (0: until the run ends).
///
/// ```
/// use trainbook::train::{ProfileSchedule, ProfilerAction};
/// let s = ProfileSchedule::new(1, 1, 2)?; // torch.profiler.schedule(wait=1, warmup=1, active=2)
/// let actions: Vec<_> = (0..5).map(|step| s.action(step)).collect();
/// use ProfilerAction::*;
/// assert_eq!(actions, [None, Warmup, Record, RecordAndSave, None]);
/// # Ok::<(), trainbook::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProfileSchedule {
    /// Steps doing nothing at the start of each cycle.
    pub wait: usize,
    /// Steps set up but not recorded, after the wait.
    pub warmup: usize,
    /// Steps recorded (at least 1).
    pub active: usize,
    /// Cycles to run (0: as many as the run has steps for). [`ProfileSchedule::new`]: 1.
    pub repeat: usize,
    /// Steps skipped before the first cycle.
    pub skip_first: usize,
}

impl ProfileSchedule {
    /// `wait` idle, `warmup` warm-up and `active` recorded steps, once (`repeat` 1; torch's
    /// own default is 0, recording cycle after cycle, which a whole training run rarely wants).
    /// An error when `active` is 0.
    pub fn new(wait: usize, warmup: usize, active: usize) -> Result<Self> {
        ProfileSchedule { wait, warmup, active, repeat: 1, skip_first: 0 }.validated()
    }

    /// The same schedule repeated `n` times (0: until the end).
    pub fn repeat(mut self, n: usize) -> Self {
        self.repeat = n;
        self
    }

    /// The same schedule after `n` steps skipped first.
    pub fn skip_first(mut self, n: usize) -> Self {
        self.skip_first = n;
        self
    }

    /// The schedule itself, or an error naming the field that torch would refuse.
    pub fn validated(self) -> Result<Self> {
        if self.active == 0 {
            return Err(Error::InvalidArgument(
                "ProfileSchedule::active must be at least 1 (the steps recorded)".into(),
            ));
        }
        Ok(self)
    }

    /// What the profiler does during step `step` (counted from 0), as torch's schedule
    /// function returns it.
    pub fn action(&self, step: usize) -> ProfilerAction {
        let Some(step) = step.checked_sub(self.skip_first) else {
            return ProfilerAction::None;
        };
        let cycle = self.wait + self.warmup + self.active;
        if self.repeat > 0 && step >= self.repeat * cycle {
            return ProfilerAction::None;
        }
        let at = step % cycle;
        if at < self.wait {
            ProfilerAction::None
        } else if at < self.wait + self.warmup {
            ProfilerAction::Warmup
        } else if at + 1 < cycle {
            ProfilerAction::Record
        } else {
            ProfilerAction::RecordAndSave
        }
    }
}

/// `n` recorded steps after one idle and one warm-up step, once: what `Trainer::profile(n)`
/// and the examples' `--profile N` record. Panics never; `n` 0 is refused where the schedule is
/// used ([`ProfileSchedule::validated`]).
impl From<usize> for ProfileSchedule {
    fn from(active: usize) -> Self {
        ProfileSchedule { wait: 1, warmup: 1, active, repeat: 1, skip_first: 0 }
    }
}
