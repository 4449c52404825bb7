//! `torch.optim.RAdam` (`_single_tensor_radam`) as an [`UpdateRule`]: torch.optim's single-tensor
//! loop (torch 2.13) line for line, with torch's defaults; the same kernels, so the same numbers
//! (`tests/parity/optimizer_rules.rs`).
use std::sync::Arc;

use tch::nn::VarStore;
use tch::Tensor;

use super::common::{decayed, moments};
use crate::optim::ops;
use crate::optim::optimizer::Optimizer;
use crate::optim::rule::{RuleState, RuleStep, SharedRule, UpdateRule};
use crate::Result;

/// `torch.optim.RAdam`'s hyper-parameters (its defaults via `Default`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RAdam {
    /// `betas[0]` (0.9).
    pub beta1: f64,
    /// `betas[1]` (0.999).
    pub beta2: f64,
    /// Added to the denominator (1e-8).
    pub eps: f64,
    /// Weight decay (0): an L2 penalty, or decoupled as AdamW's.
    pub weight_decay: f64,
    /// Decoupled weight decay.
    pub decoupled_weight_decay: bool,
}

impl Default for RAdam {
    fn default() -> Self {
        RAdam {
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            decoupled_weight_decay: false,
        }
    }
}

impl UpdateRule for RAdam {
    fn name(&self) -> &str {
        "RAdam"
    }
    fn momentum(&self) -> Option<f64> {
        Some(self.beta1)
    }
    fn with_momentum(&self, m: f64) -> Option<SharedRule> {
        Some(Arc::new(RAdam { beta1: m, ..*self }))
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
        let (beta1, beta2, step) = (self.beta1, self.beta2, s.step as f64);
        let grad = decayed(s, p, grad, self.decoupled_weight_decay)?;
        let (exp_avg, exp_avg_sq) = moments(st, p, &grad, (beta1, beta2))?;
        let bias_correction1 = 1.0 - beta1.powf(step);
        let bias_correction2 = 1.0 - beta2.powf(step);
        let corrected = &exp_avg / bias_correction1;
        let rho_inf = 2.0 / (1.0 - beta2) - 1.0;
        let rho_t = rho_inf - 2.0 * step * beta2.powf(step) / bias_correction2;
        let update = if rho_t > 5.0 {
            let rect = ((rho_t - 4.0) * (rho_t - 2.0) * rho_inf
                / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho_t))
                .powf(0.5);
            let mut sqrt = exp_avg_sq.sqrt();
            let _ = sqrt.g_add_scalar_(self.eps);
            // Python's `float / tensor` is `tensor.reciprocal() * float`.
            let adaptive = sqrt.reciprocal() * bias_correction2.powf(0.5);
            (&corrected * s.lr) * adaptive * rect
        } else {
            &corrected * s.lr
        };
        ops::add_(p, &update, -1.0)
    }
}

impl Optimizer {
    /// `torch.optim.RAdam(params, lr)` with torch's defaults ([`RAdam::default`]).
    pub fn radam(vs: &VarStore, lr: f64) -> Optimizer {
        Optimizer::with_rule(vs, Arc::new(RAdam::default()), lr)
    }
}
