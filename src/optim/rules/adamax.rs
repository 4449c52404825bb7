//! `torch.optim.Adamax` (`_single_tensor_adamax`) as an [`UpdateRule`]: torch.optim's single-tensor
//! loop (torch 2.13) line for line, with torch's defaults; the same kernels, so the same numbers
//! (`tests/parity/optimizer_rules.rs`).
use std::sync::Arc;

use tch::nn::VarStore;
use tch::Tensor;

use super::common::{decayed, zeros};
use crate::optim::ops;
use crate::optim::optimizer::Optimizer;
use crate::optim::rule::{RuleState, RuleStep, SharedRule, UpdateRule};
use crate::Result;

/// `torch.optim.Adamax`'s hyper-parameters (its defaults via `Default`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Adamax {
    /// `betas[0]` (0.9).
    pub beta1: f64,
    /// `betas[1]`, the decay of the infinity norm (0.999).
    pub beta2: f64,
    /// Added to the gradient's magnitude (1e-8).
    pub eps: f64,
    /// L2 penalty added to the gradient (0).
    pub weight_decay: f64,
}

impl Default for Adamax {
    fn default() -> Self {
        Adamax { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 }
    }
}

impl UpdateRule for Adamax {
    fn name(&self) -> &str {
        "Adamax"
    }
    fn momentum(&self) -> Option<f64> {
        Some(self.beta1)
    }
    fn with_momentum(&self, m: f64) -> Option<SharedRule> {
        Some(Arc::new(Adamax { beta1: m, ..*self }))
    }
    fn weight_decay(&self) -> f64 {
        self.weight_decay
    }
    fn update(
        &self,
        s: &RuleStep,
        p: &mut Tensor,
        grad: &Tensor,
        st: &mut RuleState,
    ) -> Result<()> {
        let grad = decayed(s, p, grad, false)?;
        let mut exp_avg = zeros(st, "exp_avg", p);
        let mut exp_inf = zeros(st, "exp_inf", p);
        let _ = exp_avg.lerp_(&grad, 1.0 - self.beta1);
        let _ = exp_inf.g_mul_scalar_(self.beta2);
        let mut magnitude = grad.abs();
        let _ = magnitude.g_add_scalar_(self.eps);
        let _ = exp_inf.maximum_out(&exp_inf, &magnitude);
        let clr = s.lr / (1.0 - self.beta1.powf(s.step as f64));
        ops::addcdiv_(p, &exp_avg, &exp_inf, -clr)
    }
}

impl Optimizer {
    /// `torch.optim.Adamax(params, lr)` with torch's defaults ([`Adamax::default`]; torch's
    /// default rate is 2e-3).
    pub fn adamax(vs: &VarStore, lr: f64) -> Optimizer {
        Optimizer::with_rule(vs, Arc::new(Adamax::default()), lr)
    }
}
