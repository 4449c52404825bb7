//! `torch.optim.Adagrad` (`_single_tensor_adagrad`) as an [`UpdateRule`]: torch.optim's
//! single-tensor loop (torch 2.13) line for line, with torch's defaults; the same kernels, so the
//! same numbers (`tests/parity/optimizer_rules.rs`).
use std::sync::Arc;

use tch::nn::VarStore;
use tch::Tensor;

use super::common::decayed;
use crate::optim::ops;
use crate::optim::optimizer::Optimizer;
use crate::optim::rule::{RuleState, RuleStep, UpdateRule};
use crate::Result;

/// `torch.optim.Adagrad`'s hyper-parameters (its defaults via `Default`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Adagrad {
    /// The rate decays as `lr / (1 + (step - 1) * lr_decay)` (0).
    pub lr_decay: f64,
    /// L2 penalty added to the gradient (0).
    pub weight_decay: f64,
    /// The sum of squared gradients starts here (0).
    pub initial_accumulator_value: f64,
    /// Added to the denominator (1e-10).
    pub eps: f64,
}

impl Default for Adagrad {
    fn default() -> Self {
        Adagrad { lr_decay: 0.0, weight_decay: 0.0, initial_accumulator_value: 0.0, eps: 1e-10 }
    }
}

impl UpdateRule for Adagrad {
    fn name(&self) -> &str {
        "Adagrad"
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
        let clr = s.lr / (1.0 + (s.step as f64 - 1.0) * self.lr_decay);
        let init = self.initial_accumulator_value;
        // torch fills it in its constructor: torch.full_like(p, initial_accumulator_value).
        let mut sum = st.get_or_insert_with("sum", || p.full_like(init)).shallow_clone();
        ops::addcmul_(&mut sum, &grad, &grad, 1.0)?;
        let mut std = sum.sqrt();
        let _ = std.g_add_scalar_(self.eps);
        ops::addcdiv_(p, &grad, &std, -clr)
    }
}

impl Optimizer {
    /// `torch.optim.Adagrad(params, lr)` with torch's defaults ([`Adagrad::default`]; torch's
    /// default rate is 0.01).
    pub fn adagrad(vs: &VarStore, lr: f64) -> Optimizer {
        Optimizer::with_rule(vs, Arc::new(Adagrad::default()), lr)
    }
}
