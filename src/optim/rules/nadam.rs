//! `torch.optim.NAdam` (`_single_tensor_nadam`) as an [`UpdateRule`]: torch.optim's single-tensor
//! loop (torch 2.13) line for line, with torch's defaults; the same kernels, so the same numbers
//! (`tests/parity/optimizer_rules.rs`).
use std::sync::Arc;

use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use super::common::{decayed, moments};
use crate::optim::ops;
use crate::optim::optimizer::Optimizer;
use crate::optim::rule::{RuleState, RuleStep, SharedRule, UpdateRule};
use crate::Result;

/// `torch.optim.NAdam`'s hyper-parameters (its defaults via `Default`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NAdam {
    /// `betas[0]` (0.9).
    pub beta1: f64,
    /// `betas[1]` (0.999).
    pub beta2: f64,
    /// Added to the denominator (1e-8).
    pub eps: f64,
    /// Weight decay (0): an L2 penalty, or decoupled as AdamW's.
    pub weight_decay: f64,
    /// Momentum decay (4e-3).
    pub momentum_decay: f64,
    /// Decoupled weight decay (NAdamW).
    pub decoupled_weight_decay: bool,
}

impl Default for NAdam {
    fn default() -> Self {
        NAdam {
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            momentum_decay: 4e-3,
            decoupled_weight_decay: false,
        }
    }
}

impl UpdateRule for NAdam {
    fn name(&self) -> &str {
        "NAdam"
    }
    fn momentum(&self) -> Option<f64> {
        Some(self.beta1)
    }
    fn with_momentum(&self, m: f64) -> Option<SharedRule> {
        Some(Arc::new(NAdam { beta1: m, ..*self }))
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
        // torch keeps mu_product as a float32 scalar on the CPU (without `capturable`).
        let mut mu_product =
            st.get_or_insert_with("mu_product", || Tensor::from(1.0f32)).shallow_clone();
        let bias_correction2 = 1.0 - beta2.powf(step);
        let grad = decayed(s, p, grad, self.decoupled_weight_decay)?;
        let mu = beta1 * (1.0 - 0.5 * 0.96f64.powf(step * self.momentum_decay));
        let mu_next = beta1 * (1.0 - 0.5 * 0.96f64.powf((step + 1.0) * self.momentum_decay));
        let _ = mu_product.g_mul_scalar_(mu);
        let (exp_avg, exp_avg_sq) = moments(st, p, &grad, (beta1, beta2))?;
        let mut denom = (&exp_avg_sq / bias_correction2).sqrt();
        let product = mu_product.to_device(Device::Cpu).to_kind(Kind::Double).double_value(&[]);
        let product_next = product * mu_next;
        let _ = denom.g_add_scalar_(self.eps);
        ops::addcdiv_(p, &grad, &denom, -s.lr * (1.0 - mu) / (1.0 - product))?;
        ops::addcdiv_(p, &exp_avg, &denom, (-s.lr * mu_next) / (1.0 - product_next))
    }
}

impl Optimizer {
    /// `torch.optim.NAdam(params, lr)` with torch's defaults ([`NAdam::default`]).
    pub fn nadam(vs: &VarStore, lr: f64) -> Optimizer {
        Optimizer::with_rule(vs, Arc::new(NAdam::default()), lr)
    }
}
