//! `torch.optim.RMSprop` (`_single_tensor_rmsprop`) as an [`UpdateRule`]: torch.optim's
//! single-tensor loop (torch 2.13) line for line, with torch's defaults; the same kernels, so the
//! same numbers (`tests/parity/optimizer_rules.rs`).
use std::sync::Arc;

use tch::nn::VarStore;
use tch::Tensor;

use super::common::{decayed, zeros};
use crate::optim::ops;
use crate::optim::optimizer::Optimizer;
use crate::optim::rule::{RuleState, RuleStep, SharedRule, UpdateRule};
use crate::Result;

/// `torch.optim.RMSprop`'s hyper-parameters (its defaults via `Default`; torchvision's
/// MobileNet recipe uses `alpha=0.9, eps=0.0316, momentum=0.9`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RMSprop {
    /// Smoothing constant of the squared-gradient average (0.99).
    pub alpha: f64,
    /// Added to the denominator (1e-8).
    pub eps: f64,
    /// L2 penalty added to the gradient (0).
    pub weight_decay: f64,
    /// Momentum factor (0).
    pub momentum: f64,
    /// Normalise by the variance (the squared average minus the squared mean gradient).
    pub centered: bool,
}

impl Default for RMSprop {
    fn default() -> Self {
        RMSprop { alpha: 0.99, eps: 1e-8, weight_decay: 0.0, momentum: 0.0, centered: false }
    }
}

impl UpdateRule for RMSprop {
    fn name(&self) -> &str {
        "RMSprop"
    }
    fn momentum(&self) -> Option<f64> {
        Some(self.momentum)
    }
    fn with_momentum(&self, m: f64) -> Option<SharedRule> {
        Some(Arc::new(RMSprop { momentum: m, ..*self }))
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
        let mut square_avg = zeros(st, "square_avg", p);
        let _ = square_avg.g_mul_scalar_(self.alpha);
        ops::addcmul_(&mut square_avg, &grad, &grad, 1.0 - self.alpha)?;
        let mut avg = if self.centered {
            let mut grad_avg = zeros(st, "grad_avg", p);
            let _ = grad_avg.lerp_(&grad, 1.0 - self.alpha);
            let mut avg = ops::addcmul(&square_avg, &grad_avg, &grad_avg, -1.0)?;
            let _ = avg.sqrt_();
            avg
        } else {
            square_avg.sqrt()
        };
        let _ = avg.g_add_scalar_(self.eps);
        if self.momentum > 0.0 {
            let mut buf = zeros(st, "momentum_buffer", p);
            let _ = buf.g_mul_scalar_(self.momentum);
            ops::addcdiv_(&mut buf, &grad, &avg, 1.0)?;
            ops::add_(p, &buf, -s.lr)
        } else {
            ops::addcdiv_(p, &grad, &avg, -s.lr)
        }
    }
}

impl Optimizer {
    /// `torch.optim.RMSprop(params, lr)` with torch's defaults ([`RMSprop::default`]); another
    /// setting: `Optimizer::with_rule(vs, Arc::new(RMSprop { momentum: 0.9, ..Default::default() }), lr)`.
    pub fn rmsprop(vs: &VarStore, lr: f64) -> Optimizer {
        Optimizer::with_rule(vs, Arc::new(RMSprop::default()), lr)
    }
}
