//! The run's learning-rate schedule part: started on a new run (torch's scheduler constructor
//! sets the first rate), restored from a checkpoint, advanced after every optimizer step or
//! after every validation per its [`Cadence`], and saved in every checkpoint.
use std::cell::RefCell;

use crate::stateful::{PartState, Stateful};
use crate::train::{Cadence, LrSchedule, Optimizer, Validation};
use crate::{Error, Result};

/// The schedule of a run, if it has one: a copy per param group, as torch's scheduler keeps a
/// rate per group (each group's schedule starts from its own rate, torch's `initial_lr`, and
/// takes its own entry of a per-group list: [`LrSchedule::for_group`]).
pub(crate) struct RunSchedule {
    template: Option<Box<dyn LrSchedule>>,
    groups: RefCell<Vec<Box<dyn LrSchedule>>>,
    /// The optimizer's number of param groups (one copy of the schedule each).
    group_count: usize,
}

impl RunSchedule {
    /// The configured schedule (checked: a bad setting, or a per-group list that does not
    /// have one entry per group, is an error naming it).
    pub(crate) fn new(
        schedule: Option<&dyn LrSchedule>,
        group_count: usize,
    ) -> Result<RunSchedule> {
        if let Some(s) = schedule {
            s.validate()?;
            for group in 0..group_count {
                s.for_group(group, group_count)?;
            }
        }
        let template = schedule.map(|s| s.box_clone());
        Ok(RunSchedule { template, groups: RefCell::default(), group_count })
    }

    fn copies(&self, n: usize) -> Result<Vec<Box<dyn LrSchedule>>> {
        self.template.iter().flat_map(|t| (0..n).map(|group| t.for_group(group, n))).collect()
    }

    /// A new run: the schedule sets the first step's rate (LinearLR, OneCycleLR) of each group.
    pub(crate) fn start(&self, opt: &mut Optimizer) -> Result<()> {
        let mut copies = self.copies(opt.group_lrs().len())?;
        if copies.is_empty() {
            return Ok(());
        }
        let lrs: Vec<f64> = copies
            .iter_mut()
            .zip(opt.group_lrs())
            .map(|(s, lr)| s.start(lr))
            .collect::<Result<_>>()?;
        opt.set_group_lrs(&lrs)?;
        *self.groups.borrow_mut() = copies;
        self.set_momentum(opt)
    }

    /// Writes the schedule's momentum into the optimizer, if it moves one (the
    /// `cycle_momentum` of OneCycleLR and CyclicLR): one for every group when the groups' copies
    /// agree, else each group's own (a per-group momentum range).
    fn set_momentum(&self, opt: &mut Optimizer) -> Result<()> {
        let groups = self.groups.borrow();
        let momentums: Option<Vec<f64>> = groups.iter().map(|s| s.momentum()).collect();
        match momentums.as_deref() {
            None | Some([]) => Ok(()),
            Some([first, rest @ ..]) if rest.iter().all(|m| m == first) => opt.set_momentum(*first),
            Some(each) => opt.set_group_momentums(each),
        }
    }

    /// Starts the schedule unless a checkpoint's state set it already (a new run, or a
    /// checkpoint of a run without a schedule); after a checkpoint's, writes its momentum back
    /// into the optimizer (torch keeps it in the optimizer's param groups).
    pub(crate) fn ensure_started(&self, opt: &mut Optimizer) -> Result<()> {
        if self.groups.borrow().is_empty() {
            return self.start(opt);
        }
        self.set_momentum(opt)
    }

    pub(crate) fn state(&self) -> serde_json::Value {
        let groups = self.groups.borrow();
        match groups.as_slice() {
            [] => serde_json::Value::Null,
            [one] => one.state(),
            many => serde_json::Value::Array(many.iter().map(|s| s.state()).collect()),
        }
    }

    /// Whether it advances after every optimizer step.
    pub(crate) fn per_step(&self) -> bool {
        self.cadence() == Some(Cadence::Step)
    }

    fn cadence(&self) -> Option<Cadence> {
        self.template.as_ref().map(|s| s.cadence())
    }

    fn advance(&self, opt: &mut Optimizer, v: Option<Validation>) -> Result<()> {
        let mut groups = self.groups.borrow_mut();
        if groups.is_empty() {
            return Ok(());
        }
        let lrs: Vec<f64> = groups
            .iter_mut()
            .zip(opt.group_lrs())
            .map(|(s, lr)| s.advance(lr, v))
            .collect::<Result<_>>()?;
        drop(groups);
        opt.set_group_lrs(&lrs)?;
        self.set_momentum(opt)
    }

    /// After an optimizer step: each group's rate for the next step.
    pub(crate) fn advance_step(&self, opt: &mut Optimizer) -> Result<()> {
        self.advance(opt, None)
    }

    /// After an epoch's validation: a per-epoch schedule sets the next epoch's rates.
    pub(crate) fn after_validation(&self, opt: &mut Optimizer, v: Validation) -> Result<()> {
        if self.cadence() == Some(Cadence::Epoch) {
            self.advance(opt, Some(v))?;
        }
        Ok(())
    }
}

/// The schedule's state in a checkpoint: one state per param group (a single state for one).
impl Stateful for RunSchedule {
    fn state_key(&self) -> String {
        "schedule".into()
    }
    fn state_dict(&self) -> Result<PartState> {
        Ok(PartState::of_value(self.state()))
    }
    fn load_state_dict(&mut self, state: PartState) -> Result<()> {
        let n = self.group_count;
        if self.template.is_none() || state.value.is_null() {
            return Ok(());
        }
        let states: Vec<&serde_json::Value> = match (n, state.value.as_array()) {
            (1, _) => vec![&state.value],
            (_, Some(list)) if list.len() == n => list.iter().collect(),
            _ => {
                return Err(Error::Checkpoint(format!(
                    "not one scheduler state for each of the {n} param groups"
                )))
            }
        };
        let mut copies = self.copies(n)?;
        for (s, saved) in copies.iter_mut().zip(states) {
            s.load_state(saved)?;
        }
        *self.groups.borrow_mut() = copies;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::{Cadence, StepLR};
    use tch::nn::VarStore;
    use tch::Device;

    #[test]
    fn a_per_epoch_schedule_moves_after_validation_and_round_trips_its_state() {
        let vs = VarStore::new(Device::Cpu);
        let _ = vs.root().zeros("w", &[2]);
        let mut opt = Optimizer::sgd(&vs, 0.1, 0.0);
        let boxed: Box<dyn LrSchedule> = Box::new(StepLR::new(1, 0.5));
        let s = RunSchedule::new(Some(boxed.as_ref()), opt.group_lrs().len()).unwrap();
        s.start(&mut opt).unwrap();
        assert!(!s.per_step());
        s.after_validation(&mut opt, Validation { loss: 1.0, accuracy: 0.5, monitored: None })
            .unwrap();
        assert_eq!(opt.lr(), 0.05);
        let saved = s.state();
        let mut again = RunSchedule::new(Some(boxed.as_ref()), opt.group_lrs().len()).unwrap();
        again.load_state_dict(PartState::of_value(saved.clone())).unwrap();
        assert_eq!(again.state(), saved);
        let none = RunSchedule::new(None, 1).unwrap();
        none.start(&mut opt).unwrap();
        none.advance_step(&mut opt).unwrap();
        assert!(none.state().is_null() && opt.lr() == 0.05);
    }

    #[test]
    fn each_param_group_follows_the_schedule_from_its_own_rate() {
        let vs = VarStore::new(Device::Cpu);
        let _ = vs.root().zeros("w", &[2, 2]);
        let _ = vs.root().zeros("b", &[2]);
        let mut opt = Optimizer::sgd(&vs, 0.1, 0.0)
            .param_group(crate::train::ParamGroup::norm_and_bias().lr(1.0))
            .unwrap();
        let boxed: Box<dyn LrSchedule> = Box::new(StepLR::new(1, 0.5).stepping(Cadence::Step));
        let s = RunSchedule::new(Some(boxed.as_ref()), opt.group_lrs().len()).unwrap();
        s.start(&mut opt).unwrap();
        s.advance_step(&mut opt).unwrap();
        assert_eq!(opt.group_lrs(), [0.05, 0.5]);
        let saved = s.state();
        assert_eq!(saved.as_array().map(Vec::len), Some(2), "{saved}");
        let mut again = RunSchedule::new(Some(boxed.as_ref()), opt.group_lrs().len()).unwrap();
        again.load_state_dict(PartState::of_value(saved.clone())).unwrap();
        again.advance_step(&mut opt).unwrap();
        assert_eq!(opt.group_lrs(), [0.025, 0.25]);
        // A single-group state does not fit two groups.
        let one = StepLR::new(1, 0.5).state();
        let err = again.load_state_dict(PartState::of_value(one)).unwrap_err().to_string();
        assert!(err.contains("2 param groups"), "{err}");
    }

    #[test]
    fn one_cycle_gives_each_group_its_own_peak_and_refuses_a_list_of_another_length() {
        use crate::train::OneCycleLR;
        let vs = VarStore::new(Device::Cpu);
        let _ = vs.root().zeros("w", &[2, 2]);
        let _ = vs.root().zeros("b", &[2]);
        let mut opt = Optimizer::sgd(&vs, 0.1, 0.9)
            .param_group(crate::train::ParamGroup::norm_and_bias())
            .unwrap();
        let cycle = OneCycleLR::new(0.1, 10).group_max_lrs(vec![0.1, 2.0]);
        let boxed: Box<dyn LrSchedule> = Box::new(cycle.clone());
        let s = RunSchedule::new(Some(boxed.as_ref()), 2).unwrap();
        s.start(&mut opt).unwrap();
        s.advance_step(&mut opt).unwrap();
        let (w, b) = (OneCycleLR::new(0.1, 10), OneCycleLR::new(2.0, 10));
        assert_eq!(opt.group_lrs(), [w.lr_at(1).unwrap(), b.lr_at(1).unwrap()]);
        // Each group's state keeps its own peak: a resumed run goes on with both.
        let mut again = RunSchedule::new(Some(boxed.as_ref()), 2).unwrap();
        again.load_state_dict(PartState::of_value(s.state())).unwrap();
        again.advance_step(&mut opt).unwrap();
        assert_eq!(opt.group_lrs(), [w.lr_at(2).unwrap(), b.lr_at(2).unwrap()]);
        for groups in [1, 3] {
            let err = RunSchedule::new(Some(boxed.as_ref()), groups).err().unwrap().to_string();
            let want = format!("expected {groups} values for max_lr (one per param group), got 2");
            assert!(err.contains(&want), "{err}");
        }
    }

    #[test]
    fn cyclic_gives_each_group_its_own_bounds_and_momentum() {
        use crate::train::CyclicLR;
        let vs = VarStore::new(Device::Cpu);
        let _ = vs.root().zeros("w", &[2, 2]);
        let _ = vs.root().zeros("b", &[2]);
        let mut opt = Optimizer::adam(&vs, 0.1)
            .param_group(crate::train::ParamGroup::norm_and_bias())
            .unwrap();
        let cyclic = CyclicLR::new(0.0, 0.0, 4)
            .group_lrs(vec![(0.001, 0.01), (0.01, 0.2)])
            .group_momentums(vec![(0.8, 0.9), (0.85, 0.99)]);
        let boxed: Box<dyn LrSchedule> = Box::new(cyclic);
        let s = RunSchedule::new(Some(boxed.as_ref()), 2).unwrap();
        s.start(&mut opt).unwrap();
        assert_eq!(opt.group_lrs(), [0.001, 0.01]);
        s.advance_step(&mut opt).unwrap();
        let w = CyclicLR::new(0.001, 0.01, 4);
        let b = CyclicLR::new(0.01, 0.2, 4).base_momentum(0.85).max_momentum(0.99);
        assert_eq!(opt.group_lrs(), [w.lr_at(1).unwrap(), b.lr_at(1).unwrap()]);
        let each = [w.momentum_at(1).unwrap(), b.momentum_at(1).unwrap()];
        assert_eq!(opt.group_momentums(), each.map(Some), "each group's beta1");
        let err = RunSchedule::new(Some(boxed.as_ref()), 3).err().unwrap().to_string();
        assert!(err.contains("expected 3 values for base_lr and max_lr"), "{err}");
    }

    #[test]
    fn one_cycle_moves_the_momentum_and_puts_it_back_after_a_checkpoint() {
        use crate::train::OneCycleLR;
        let vs = VarStore::new(Device::Cpu);
        let _ = vs.root().zeros("w", &[2]);
        let mut opt = Optimizer::adam(&vs, 0.1);
        let cycle = OneCycleLR::new(0.1, 10);
        let boxed: Box<dyn LrSchedule> = Box::new(cycle.clone());
        let s = RunSchedule::new(Some(boxed.as_ref()), 1).unwrap();
        s.start(&mut opt).unwrap();
        assert_eq!(opt.momentum(), Some(cycle.momentum_at(0).unwrap()));
        for _ in 0..3 {
            s.advance_step(&mut opt).unwrap();
        }
        let at3 = cycle.momentum_at(3).unwrap();
        assert_eq!(opt.momentum(), Some(at3));
        assert!(at3 < 0.95 && at3 > 0.85, "{at3}");
        // A resumed run: the optimizer is made anew (beta1 0.9), the checkpoint's schedule
        // sets the momentum of its step back.
        let saved = s.state();
        let mut fresh = Optimizer::adam(&vs, 0.1);
        let mut again = RunSchedule::new(Some(boxed.as_ref()), 1).unwrap();
        again.load_state_dict(PartState::of_value(saved.clone())).unwrap();
        again.ensure_started(&mut fresh).unwrap();
        assert_eq!(fresh.momentum(), Some(at3));
        // A checkpoint written before the momentum cycled (no such fields): it does not cycle.
        let mut old = saved.clone();
        for k in ["cycle_momentum", "base_momentum", "max_momentum"] {
            old.as_object_mut().unwrap().remove(k);
        }
        let mut fresh = Optimizer::adam(&vs, 0.1);
        let mut again = RunSchedule::new(Some(boxed.as_ref()), 1).unwrap();
        again.load_state_dict(PartState::of_value(old)).unwrap();
        again.ensure_started(&mut fresh).unwrap();
        again.advance_step(&mut fresh).unwrap();
        assert_eq!(fresh.momentum(), Some(0.9));
        // An update rule's momentum: RMSprop's (0 by default, as torch's).
        let mut rms = Optimizer::rmsprop(&vs, 0.1);
        assert_eq!(rms.momentum(), Some(0.0));
        s.start(&mut rms).unwrap();
        assert_eq!(rms.momentum(), Some(cycle.momentum_at(0).unwrap()));
        // A rule without a momentum: an error naming it, unless the momentum stays.
        struct SignSgd;
        impl crate::train::UpdateRule for SignSgd {
            fn name(&self) -> &str {
                "SignSGD"
            }
            fn update(
                &self,
                s: &crate::train::RuleStep,
                p: &mut tch::Tensor,
                grad: &tch::Tensor,
                _: &mut crate::train::RuleState,
            ) -> Result<()> {
                crate::train::ops::add_(p, &grad.sign(), -s.lr)
            }
        }
        let mut sign = Optimizer::with_rule(&vs, std::sync::Arc::new(SignSgd), 0.1);
        let err = s.start(&mut sign).unwrap_err().to_string();
        assert!(err.contains("SignSGD") && err.contains("cycle_momentum(false)"), "{err}");
        assert_eq!(sign.momentum(), None);
        let lr_only: Box<dyn LrSchedule> = Box::new(cycle.cycle_momentum(false));
        RunSchedule::new(Some(lr_only.as_ref()), 1).unwrap().start(&mut sign).unwrap();
    }
}
