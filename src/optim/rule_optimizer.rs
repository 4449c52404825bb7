//! An [`Optimizer`] that updates its parameters with an [`UpdateRule`](super::UpdateRule)
//! ([`Optimizer::with_rule`]): each parameter's step under its group's rate and weight decay,
//! with the rule's own state.
use tch::nn::VarStore;

use super::kind::OptimizerKind;
use super::rule::{RuleStep, SharedRule};
use super::Optimizer;
use crate::Result;

impl Optimizer {
    /// An optimizer over all trainable variables of `vs` that updates them with `rule` at rate
    /// `lr`.
    pub fn with_rule(vs: &VarStore, rule: SharedRule, lr: f64) -> Optimizer {
        let kind = OptimizerKind::Rule { weight_decay: rule.weight_decay() };
        let mut opt = Optimizer::new(vs, kind, lr);
        opt.rule = Some(rule);
        opt
    }
    /// The rule of an optimizer made with [`with_rule`](Self::with_rule).
    pub fn rule(&self) -> Option<&SharedRule> {
        self.rule.as_ref()
    }
    /// The rule's step of every parameter with a gradient.
    pub(super) fn rule_step(&mut self, rule: &SharedRule) -> Result<()> {
        let rules = self.group_rules(rule)?;
        tch::no_grad(|| {
            for ((name, p), &g) in self.params.iter_mut().zip(&self.group_of) {
                let grad = p.grad();
                if !grad.defined() {
                    continue;
                }
                let st = self.state.entry(name.clone()).or_default();
                st.sync_step();
                st.step += 1;
                let (kind, lr) = self.groups[g].rule(self.kind);
                let weight_decay = match kind {
                    OptimizerKind::Rule { weight_decay } => weight_decay,
                    _ => rules[g].weight_decay(),
                };
                let step = RuleStep { lr, weight_decay, step: st.step };
                rules[g].update(&step, p, &grad, &mut st.rule)?;
            }
            Ok(())
        })
    }
}
