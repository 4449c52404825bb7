//! Schedules made of schedules: [`SequentialLR`] (one after another, switching at milestones:
//! a warmup, then a cosine decay) and [`ChainedScheduler`] (all at once, each step applying
//! every one in turn), with torch's semantics and state.
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{check, Cadence, LrSchedule, Validation};
use crate::{Error, Result};

/// The sub-schedules' common checks: at least one, none a [`ReduceLROnPlateau`](super::ReduceLROnPlateau)
/// (torch refuses it: its `step` needs the metric), a [`OneCycleLR`](super::OneCycleLR) or a
/// [`CyclicLR`](super::CyclicLR) (torch takes them, but their constructors overwrite the rate
/// the others start from), all
/// stepped at the same cadence.
fn check_parts(name: &str, parts: &[Box<dyn LrSchedule>]) -> Result<()> {
    check(!parts.is_empty(), name, "schedules", "at least one schedule", "none")?;
    for (i, part) in parts.iter().enumerate() {
        check(
            part.name() != "ReduceLROnPlateau",
            name,
            &format!("schedules[{i}]"),
            "a schedule stepped without a metric (torch refuses ReduceLROnPlateau here)",
            "ReduceLROnPlateau",
        )?;
        for own_start in ["OneCycleLR", "CyclicLR"] {
            check(
                part.name() != own_start,
                name,
                &format!("schedules[{i}]"),
                &format!(
                    "not {own_start} (in torch its constructor rewrites the optimizer's rate, \
                     from which the other schedules start; use it on its own)"
                ),
                own_start,
            )?;
        }
        check(
            part.cadence() == parts[0].cadence(),
            name,
            &format!("schedules[{i}]"),
            &format!("stepped like schedules[0] ({:?})", parts[0].cadence()),
            format!("{} stepped per {:?}", part.name(), part.cadence()),
        )?;
        part.validate()?;
    }
    Ok(())
}

/// The saved form of a composite schedule: its own counters and each part's state by name.
#[derive(Serialize, Deserialize)]
struct Saved {
    kind: String,
    last_epoch: u64,
    initial_lr: f64,
    milestones: Vec<u64>,
    schedules: Vec<(String, Value)>,
}

fn save(
    name: &str,
    last_epoch: u64,
    initial_lr: f64,
    milestones: &[u64],
    parts: &[Box<dyn LrSchedule>],
) -> Value {
    let schedules = parts.iter().map(|p| (p.name().to_string(), p.state())).collect();
    let saved = Saved {
        kind: name.into(),
        last_epoch,
        initial_lr,
        milestones: milestones.to_vec(),
        schedules,
    };
    serde_json::to_value(saved).unwrap_or(Value::Null)
}

/// Reads a state written by [`save`] into `parts` (which must be the same kinds, in order).
fn load(name: &str, state: &Value, parts: &mut [Box<dyn LrSchedule>]) -> Result<Saved> {
    let bad = |why: String| Error::Checkpoint(format!("{name} state: {why}"));
    let saved: Saved = serde_json::from_value(state.clone()).map_err(|e| bad(format!("{e}")))?;
    let kinds: Vec<&str> = saved.schedules.iter().map(|(n, _)| n.as_str()).collect();
    let ours: Vec<&str> = parts.iter().map(|p| p.name()).collect();
    if saved.kind != name || kinds != ours {
        return Err(bad(format!("saved for {} of {kinds:?}, not {name} of {ours:?}", saved.kind)));
    }
    for (part, (_, s)) in parts.iter_mut().zip(&saved.schedules) {
        part.load_state(s)?;
    }
    Ok(saved)
}

/// `torch.optim.lr_scheduler.SequentialLR`: `schedules[0]` runs until the first milestone,
/// then `schedules[1]` restarts from the optimizer's initial rate (torch's `step(0)`, the
/// closed form at step 0) and runs until the next, and so on. `milestones` has one entry fewer
/// than `schedules`, in steps of the schedules' common [`Cadence`]. A `ReduceLROnPlateau`, a
/// `OneCycleLR` or a `CyclicLR` among them is an [`Error::InvalidArgument`].
///
/// ```
/// use trainbook::train::{Cadence, CosineAnnealingLR, LinearLR, LrSchedule, SequentialLR};
/// # fn main() -> trainbook::Result<()> {
/// // 3 warmup steps from a tenth of 0.1, then a cosine decay over 5 steps, per optimizer step.
/// let warmup = LinearLR::new(0.1, 1.0, 3);
/// let cosine = CosineAnnealingLR::new(0.1, 5, 0.0).stepping(Cadence::Step);
/// let mut sched = SequentialLR::new(vec![Box::new(warmup), Box::new(cosine)], vec![3]);
/// let mut lr = sched.start(0.1)?;
/// let mut lrs = vec![lr];
/// for _ in 0..4 {
///     lr = sched.advance(lr, None)?;
///     lrs.push(lr);
/// }
/// assert!((lrs[0] - 0.01).abs() < 1e-15 && (lrs[3] - 0.1).abs() < 1e-15); // the switch at 3
/// assert!(lrs[4] < 0.1);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct SequentialLR {
    schedules: Vec<Box<dyn LrSchedule>>,
    milestones: Vec<u64>,
    initial_lr: f64,
    last_epoch: u64,
}

impl SequentialLR {
    /// `SequentialLR(optimizer, schedulers, milestones)`. Checked by [`LrSchedule::validate`]:
    /// `milestones.len() + 1 == schedules.len()`, milestones increasing, no
    /// `ReduceLROnPlateau`, one cadence for all.
    pub fn new(schedules: Vec<Box<dyn LrSchedule>>, milestones: Vec<u64>) -> Self {
        SequentialLR { schedules, milestones, initial_lr: 0.0, last_epoch: 0 }
    }

    /// The schedule that runs at step `step` (torch's `bisect_right(milestones, step)`).
    fn index(&self, step: u64) -> usize {
        self.milestones.iter().filter(|&&m| m <= step).count()
    }
}

impl LrSchedule for SequentialLR {
    fn name(&self) -> &'static str {
        "SequentialLR"
    }
    fn cadence(&self) -> Cadence {
        self.schedules.first().map_or(Cadence::Epoch, |s| s.cadence())
    }
    fn validate(&self) -> Result<()> {
        check_parts(self.name(), &self.schedules)?;
        let (n, m) = (self.schedules.len(), self.milestones.len());
        check(
            m + 1 == n,
            self.name(),
            "milestones",
            &format!("{} entries (one fewer than schedules)", n - 1),
            m,
        )?;
        let increasing = self.milestones.windows(2).all(|w| w[0] < w[1]);
        check(
            increasing,
            self.name(),
            "milestones",
            "strictly increasing",
            format!("{:?}", self.milestones),
        )
    }
    /// Starts the schedule that runs at step 0 on `lr`, the optimizer's initial rate (torch
    /// resets the rate to `initial_lr` first).
    fn start(&mut self, lr: f64) -> Result<f64> {
        self.validate()?;
        (self.initial_lr, self.last_epoch) = (lr, 0);
        let first = self.index(0);
        self.schedules[first].start(lr)
    }
    /// Like [`start`](Self::start) from `initial_lr`: torch's constructor resets the rate.
    fn start_chained(&mut self, _lr: f64, initial_lr: f64) -> Result<f64> {
        self.start(initial_lr)
    }
    fn advance(&mut self, lr: f64, validation: Option<Validation>) -> Result<f64> {
        self.validate()?;
        self.last_epoch += 1;
        let i = self.index(self.last_epoch);
        if i > 0 && self.milestones[i - 1] == self.last_epoch {
            self.schedules[i].restart_from(lr, self.initial_lr)
        } else {
            self.schedules[i].advance(lr, validation)
        }
    }
    fn steps(&self) -> u64 {
        self.last_epoch
    }
    fn state(&self) -> Value {
        save(self.name(), self.last_epoch, self.initial_lr, &self.milestones, &self.schedules)
    }
    fn load_state(&mut self, state: &Value) -> Result<()> {
        let saved = load(self.name(), state, &mut self.schedules)?;
        if saved.milestones != self.milestones {
            let why = format!("milestones {:?}, not {:?}", saved.milestones, self.milestones);
            return Err(Error::Checkpoint(format!("SequentialLR state: saved with {why}")));
        }
        (self.last_epoch, self.initial_lr) = (saved.last_epoch, saved.initial_lr);
        self.validate()
    }
    fn box_clone(&self) -> Box<dyn LrSchedule> {
        Box::new(self.clone())
    }
}

/// `torch.optim.lr_scheduler.ChainedScheduler`: every step applies each schedule in turn to the
/// rate the previous one left (torch's chainable forms), e.g. a per-step warmup multiplied into
/// a decay. Starting applies each schedule's start in order, as constructing them one after
/// another on one optimizer does.
///
/// ```
/// use trainbook::train::{ChainedScheduler, LinearLR, LrSchedule, StepLR, Cadence};
/// # fn main() -> trainbook::Result<()> {
/// let warmup = LinearLR::new(0.5, 1.0, 2).stepping(Cadence::Epoch);
/// let mut sched = ChainedScheduler::new(vec![Box::new(warmup), Box::new(StepLR::new(2, 0.1))]);
/// let mut lr = sched.start(1.0)?; // 0.5: the warmup's start factor
/// lr = sched.advance(lr, None)?; // 0.75: warming up
/// lr = sched.advance(lr, None)?; // 1.0 * 0.1: warm, and StepLR's first decay
/// assert!((lr - 0.1).abs() < 1e-15);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct ChainedScheduler {
    schedules: Vec<Box<dyn LrSchedule>>,
    initial_lr: f64,
    last_epoch: u64,
}

impl ChainedScheduler {
    /// `ChainedScheduler(schedulers)`. Checked by [`LrSchedule::validate`]: no
    /// `ReduceLROnPlateau`, one cadence for all.
    pub fn new(schedules: Vec<Box<dyn LrSchedule>>) -> Self {
        ChainedScheduler { schedules, initial_lr: 0.0, last_epoch: 0 }
    }
}

impl LrSchedule for ChainedScheduler {
    fn name(&self) -> &'static str {
        "ChainedScheduler"
    }
    fn cadence(&self) -> Cadence {
        self.schedules.first().map_or(Cadence::Epoch, |s| s.cadence())
    }
    fn validate(&self) -> Result<()> {
        check_parts(self.name(), &self.schedules)
    }
    fn start(&mut self, lr: f64) -> Result<f64> {
        self.start_chained(lr, lr)
    }
    fn start_chained(&mut self, lr: f64, initial_lr: f64) -> Result<f64> {
        self.validate()?;
        (self.initial_lr, self.last_epoch) = (initial_lr, 0);
        let mut lr = lr;
        for part in &mut self.schedules {
            lr = part.start_chained(lr, initial_lr)?;
        }
        Ok(lr)
    }
    fn advance(&mut self, lr: f64, validation: Option<Validation>) -> Result<f64> {
        self.validate()?;
        self.last_epoch += 1;
        let mut lr = lr;
        for part in &mut self.schedules {
            lr = part.advance(lr, validation)?;
        }
        Ok(lr)
    }
    fn steps(&self) -> u64 {
        self.last_epoch
    }
    fn state(&self) -> Value {
        save(self.name(), self.last_epoch, self.initial_lr, &[], &self.schedules)
    }
    fn load_state(&mut self, state: &Value) -> Result<()> {
        let saved = load(self.name(), state, &mut self.schedules)?;
        (self.last_epoch, self.initial_lr) = (saved.last_epoch, saved.initial_lr);
        self.validate()
    }
    fn box_clone(&self) -> Box<dyn LrSchedule> {
        Box::new(self.clone())
    }
}
