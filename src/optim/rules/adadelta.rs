//! `torch.optim.Adadelta` (`_single_tensor_adadelta`) as an [`UpdateRule`]: torch.optim's
//! single-tensor loop (torch 2.13) line for line, with torch's defaults; the same kernels, so the
//! same numbers (`tests/parity/optimizer_rules.rs`).
use std::sync::Arc;

use tch::nn::VarStore;
use tch::Tensor;

use super::common::{decayed, zeros};
use crate::optim::ops;
use crate::optim::optimizer::Optimizer;
use crate::optim::rule::{RuleState, RuleStep, UpdateRule};
use crate::Result;

/// `torch.optim.Adadelta`'s hyper-parameters (its defaults via `Default`; torch's default
/// rate is 1.0: [`Optimizer::adadelta`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Adadelta {
    /// Smoothing constant of the running averages (0.9).
    pub rho: f64,
    /// Added inside the square roots (1e-6).
    pub eps: f64,
    /// L2 penalty added to the gradient (0).
    pub weight_decay: f64,
}

impl Default for Adadelta {
    fn default() -> Self {
        Adadelta { rho: 0.9, eps: 1e-6, weight_decay: 0.0 }
    }
}

impl UpdateRule for Adadelta {
    fn name(&self) -> &str {
        "Adadelta"
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
        let rho = self.rho;
        let grad = decayed(s, p, grad, false)?;
        let mut square_avg = zeros(st, "square_avg", p);
        let mut acc_delta = zeros(st, "acc_delta", p);
        let _ = square_avg.g_mul_scalar_(rho);
        ops::addcmul_(&mut square_avg, &grad, &grad, 1.0 - rho)?;
        let mut std = square_avg.g_add_scalar(self.eps);
        let _ = std.sqrt_();
        let mut delta = acc_delta.g_add_scalar(self.eps);
        let _ = delta.sqrt_();
        let _ = delta.g_div_(&std);
        let _ = delta.g_mul_(&grad);
        let _ = acc_delta.g_mul_scalar_(rho);
        ops::addcmul_(&mut acc_delta, &delta, &delta, 1.0 - rho)?;
        ops::add_(p, &delta, -s.lr)
    }
}

impl Optimizer {
    /// `torch.optim.Adadelta(params, lr)` with torch's defaults ([`Adadelta::default`]; torch's
    /// default rate is 1.0).
    pub fn adadelta(vs: &VarStore, lr: f64) -> Optimizer {
        Optimizer::with_rule(vs, Arc::new(Adadelta::default()), lr)
    }
}
