//! The run's learning-rate schedule part: started on a new run (torch's scheduler constructor
//! sets the first rate), restored from a checkpoint, advanced after every optimizer step or
//! after every validation per its [`Cadence`], and saved in every checkpoint.
use std::cell::RefCell;
use std::path::Path;

use crate::train::{Cadence, LrSchedule, Optimizer, Validation};
use crate::Result;

/// The schedule of a run, if it has one.
pub(crate) struct RunSchedule(Option<RefCell<Box<dyn LrSchedule>>>);

impl RunSchedule {
    /// The configured schedule (checked: a bad setting is an error naming it).
    pub(crate) fn new(schedule: Option<&dyn LrSchedule>) -> Result<RunSchedule> {
        if let Some(s) = schedule {
            s.validate()?;
        }
        Ok(RunSchedule(schedule.map(|s| RefCell::new(s.box_clone()))))
    }

    /// A new run: the schedule sets the first step's rate (LinearLR, OneCycleLR).
    pub(crate) fn start(&self, opt: &mut Optimizer) -> Result<()> {
        if let Some(s) = &self.0 {
            opt.set_lr(s.borrow_mut().start(opt.lr())?);
        }
        Ok(())
    }

    /// A resumed run: the schedule's state from the checkpoint in `dir` (a checkpoint of a run
    /// without a schedule holds none: the schedule starts there).
    pub(crate) fn restore(
        &self,
        saved: &serde_json::Value,
        dir: &Path,
        opt: &mut Optimizer,
    ) -> Result<()> {
        let Some(s) = &self.0 else { return Ok(()) };
        if saved.is_null() {
            return self.start(opt);
        }
        s.borrow_mut().load_state(saved).map_err(|e| {
            crate::Error::Checkpoint(format!("scheduler state in {}: {e}", dir.display()))
        })
    }

    /// The state for a checkpoint (`Null` without a schedule).
    pub(crate) fn state(&self) -> serde_json::Value {
        self.0.as_ref().map_or(serde_json::Value::Null, |s| s.borrow().state())
    }

    /// Whether it advances after every optimizer step.
    pub(crate) fn per_step(&self) -> bool {
        self.cadence() == Some(Cadence::Step)
    }

    fn cadence(&self) -> Option<Cadence> {
        self.0.as_ref().map(|s| s.borrow().cadence())
    }

    /// After an optimizer step that used `lr`: the next step's rate.
    pub(crate) fn advance_step(&self, lr: f64) -> Result<f64> {
        match &self.0 {
            Some(s) => s.borrow_mut().advance(lr, None),
            None => Ok(lr),
        }
    }

    /// After an epoch's validation: a per-epoch schedule sets the next epoch's rate.
    pub(crate) fn after_validation(&self, opt: &mut Optimizer, v: Validation) -> Result<()> {
        if let (Some(s), Some(Cadence::Epoch)) = (&self.0, self.cadence()) {
            opt.set_lr(s.borrow_mut().advance(opt.lr(), Some(v))?);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::StepLR;
    use tch::nn::VarStore;
    use tch::Device;

    #[test]
    fn a_per_epoch_schedule_moves_after_validation_and_round_trips_its_state() {
        let vs = VarStore::new(Device::Cpu);
        let _ = vs.root().zeros("w", &[2]);
        let mut opt = Optimizer::sgd(&vs, 0.1, 0.0);
        let boxed: Box<dyn LrSchedule> = Box::new(StepLR::new(1, 0.5));
        let s = RunSchedule::new(Some(boxed.as_ref())).unwrap();
        s.start(&mut opt).unwrap();
        assert!(!s.per_step());
        s.after_validation(&mut opt, Validation { loss: 1.0, accuracy: 0.5 }).unwrap();
        assert_eq!(opt.lr(), 0.05);
        let saved = s.state();
        let again = RunSchedule::new(Some(boxed.as_ref())).unwrap();
        again.restore(&saved, Path::new("ckpt"), &mut opt).unwrap();
        assert_eq!(again.state(), saved);
        let none = RunSchedule::new(None).unwrap();
        assert!(none.state().is_null() && none.advance_step(0.3).unwrap() == 0.3);
    }
}
