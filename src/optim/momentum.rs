//! The momentum a schedule moves (torch's `cycle_momentum` in `OneCycleLR` and `CyclicLR`):
//! SGD's and RMSprop's `momentum`, the `betas[0]` of Adam, AdamW, NAdam, RAdam and Adamax; for
//! every param group at once, or per group as torch's schedulers write it when given a list.
use super::kind::OptimizerKind;
use super::rule::SharedRule;
use super::Optimizer;
use crate::{Error, Result};

/// [`Error::InvalidArgument`] unless `m` can be a momentum (finite and >= 0).
fn check(m: f64) -> Result<()> {
    if m >= 0.0 && m.is_finite() {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!("a momentum must be finite and >= 0, got {m}")))
    }
}

/// `rule` with momentum `m`, or the error torch gives for an optimizer without one.
fn rule_with(rule: Option<&SharedRule>, m: f64) -> Result<SharedRule> {
    rule.and_then(|r| r.with_momentum(m)).ok_or_else(|| {
        let name = rule.map_or("an update rule", |r| r.name());
        Error::InvalidArgument(format!(
            "a schedule's momentum (cycle_momentum of OneCycleLR or CyclicLR) cannot be set on \
             {name}'s optimizer: the rule has no momentum (UpdateRule::with_momentum; or the \
             schedule's cycle_momentum(false))"
        ))
    })
}

impl Optimizer {
    /// The momentum a schedule may move, of the default group (torch's
    /// `param_groups[0]["momentum"]` for SGD, `["betas"][0]` for Adam and AdamW; an
    /// [`UpdateRule`](super::UpdateRule)'s own: RMSprop's momentum, the beta1 of NAdam, RAdam
    /// and Adamax); `None` for a rule without one.
    pub fn momentum(&self) -> Option<f64> {
        self.group_momentums()[0]
    }

    /// Each group's momentum, in the order of [`group_lrs`](Self::group_lrs) (`None` for a rule
    /// without one).
    pub fn group_momentums(&self) -> Vec<Option<f64>> {
        let own = match self.kind {
            OptimizerKind::Rule { .. } => self.rule.as_ref().and_then(|r| r.momentum()),
            kind => kind.momentum(),
        };
        self.groups.iter().map(|g| own.map(|m| g.momentum.unwrap_or(m))).collect()
    }

    /// Sets the momentum of every group for the next steps, where torch's schedulers write it
    /// ([`LrSchedule::momentum`](crate::train::LrSchedule::momentum): the `cycle_momentum` of
    /// `OneCycleLR` and `CyclicLR`): SGD's momentum (a momentum buffer starts at the next step if
    /// there was none), Adam's and AdamW's beta1, and an [`UpdateRule`](super::UpdateRule)'s
    /// through [`with_momentum`](super::UpdateRule::with_momentum) (RMSprop's momentum, the
    /// beta1 of NAdam, RAdam and Adamax). [`Error::InvalidArgument`] for a rule without a
    /// momentum (torch's "optimizer must support momentum or beta1") and for a momentum that is
    /// not finite and >= 0; nothing changes then. Like the kind's other hyper-parameters, the
    /// momentum is not restored by [`load_state_dict`](Self::load_state_dict) (the optimizer
    /// keeps its own): a schedule writes it back on a resume.
    pub fn set_momentum(&mut self, m: f64) -> Result<()> {
        check(m)?;
        match &mut self.kind {
            OptimizerKind::Sgd { momentum, .. } => *momentum = m,
            OptimizerKind::Adam { beta1, .. } | OptimizerKind::AdamW { beta1, .. } => *beta1 = m,
            OptimizerKind::Rule { .. } => self.rule = Some(rule_with(self.rule.as_ref(), m)?),
        }
        for g in &mut self.groups {
            g.momentum = None;
        }
        Ok(())
    }

    /// Sets each group's momentum, in the order of [`group_lrs`](Self::group_lrs) (what torch's
    /// `OneCycleLR` and `CyclicLR` write when given `base_momentum` and `max_momentum` as lists).
    /// Errors ([`Error::InvalidArgument`]) as [`set_momentum`](Self::set_momentum)'s, and when
    /// the count differs from the number of groups; nothing changes then.
    pub fn set_group_momentums(&mut self, momentums: &[f64]) -> Result<()> {
        self.check_one_per_group(momentums.len(), "momentums")?;
        for &m in momentums {
            check(m)?;
        }
        if matches!(self.kind, OptimizerKind::Rule { .. }) {
            rule_with(self.rule.as_ref(), momentums[0])?;
        }
        for (g, &m) in self.groups.iter_mut().zip(momentums) {
            g.momentum = Some(m);
        }
        Ok(())
    }

    /// The rule each group steps with: the optimizer's, with the group's own momentum where it
    /// has one.
    pub(super) fn group_rules(&self, rule: &SharedRule) -> Result<Vec<SharedRule>> {
        self.groups
            .iter()
            .map(|g| match g.momentum {
                Some(m) => rule_with(Some(rule), m),
                None => Ok(rule.clone()),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tch::nn::VarStore;
    use tch::{Device, Kind, Tensor};

    use crate::train::{Optimizer, ParamGroup, RMSprop};

    /// A store with `w` [3] and `b` [2], both from `init`.
    fn store(init: &[f32]) -> VarStore {
        let vs = VarStore::new(Device::Cpu);
        let _ = vs.root().var_copy("w", &Tensor::from_slice(&init[..3]));
        let _ = vs.root().var_copy("b", &Tensor::from_slice(&init[3..]));
        vs
    }

    /// Two steps of `opt` on a loss whose gradients are fixed.
    fn two_steps(vs: &VarStore, opt: &mut Optimizer) {
        let vars = vs.variables();
        for _ in 0..2 {
            opt.zero_grad();
            let gw = Tensor::from_slice(&[0.5f32, -1.0, 2.0]);
            let gb = Tensor::from_slice(&[-0.25f32, 3.0]);
            ((&vars["w"] * gw).sum(Kind::Float) + (&vars["b"] * gb).sum(Kind::Float)).backward();
            opt.step().unwrap();
        }
    }

    #[test]
    fn each_group_steps_with_its_own_momentum_and_set_momentum_sets_them_all() {
        let init = [1.0f32, -2.0, 0.5, 3.0, -1.5];
        let rms = |m: f64| Arc::new(RMSprop { momentum: m, ..Default::default() });
        for kind in ["sgd", "rmsprop"] {
            let make = |vs: &VarStore, m: f64| match kind {
                "sgd" => Optimizer::sgd(vs, 0.1, m),
                _ => Optimizer::with_rule(vs, rms(m), 0.1),
            };
            let vs = store(&init);
            let mut opt = make(&vs, 0.3).param_group(ParamGroup::prefix("b")).unwrap();
            opt.set_group_momentums(&[0.5, 0.9]).unwrap();
            assert_eq!(opt.group_momentums(), [Some(0.5), Some(0.9)]);
            assert_eq!(opt.momentum(), Some(0.5), "the default group's");
            two_steps(&vs, &mut opt);
            // The same steps with one momentum for every parameter: w as with 0.5, b as with 0.9.
            for (m, name) in [(0.5, "w"), (0.9, "b")] {
                let alone = store(&init);
                two_steps(&alone, &mut make(&alone, m));
                assert!(vs.variables()[name].equal(&alone.variables()[name]), "{kind}: {name}");
            }
            opt.set_momentum(0.7).unwrap();
            assert_eq!(opt.group_momentums(), [Some(0.7), Some(0.7)], "{kind}");
        }
    }

    #[test]
    fn group_momentums_are_checked_and_a_refusal_changes_nothing() {
        let vs = store(&[0.0; 5]);
        let mut opt = Optimizer::adam(&vs, 0.1).param_group(ParamGroup::prefix("b")).unwrap();
        let err = opt.set_group_momentums(&[0.9]).unwrap_err().to_string();
        assert!(err.contains("1 momentums for 2 param groups (default, b)"), "{err}");
        let err = opt.set_group_momentums(&[0.9, f64::NAN]).unwrap_err().to_string();
        assert!(err.contains("finite and >= 0"), "{err}");
        assert_eq!(opt.group_momentums(), [Some(0.9), Some(0.9)], "Adam's beta1, unchanged");
        // A rule without a momentum (Adagrad): refused by name, as torch refuses it.
        let mut adagrad =
            Optimizer::adagrad(&vs, 0.1).param_group(ParamGroup::prefix("b")).unwrap();
        let err = adagrad.set_group_momentums(&[0.9, 0.8]).unwrap_err().to_string();
        assert!(err.contains("Adagrad") && err.contains("cycle_momentum(false)"), "{err}");
        assert_eq!(adagrad.group_momentums(), [None, None]);
    }
}
