//! Adagrad, Adadelta and Adamax as [`UpdateRule`]s: torch.optim's single-tensor loops
//! (`_single_tensor_adagrad`, `_single_tensor_adadelta`, `_single_tensor_adamax`, torch 2.13)
//! line for line, with torch's defaults; the same kernels, so the same numbers
//! (`tests/parity/optimizer_rules.rs`).
use std::sync::Arc;

use tch::nn::VarStore;
use tch::Tensor;

use super::ops;
use super::rule::{RuleState, RuleStep, SharedRule, UpdateRule};
use super::rules::{decayed, zeros};
use super::Optimizer;
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
    /// `torch.optim.Adagrad(params, lr)` with torch's defaults ([`Adagrad::default`]; torch's
    /// default rate is 0.01).
    pub fn adagrad(vs: &VarStore, lr: f64) -> Optimizer {
        Optimizer::with_rule(vs, Arc::new(Adagrad::default()), lr)
    }
    /// `torch.optim.Adadelta(params, lr)` with torch's defaults ([`Adadelta::default`]; torch's
    /// default rate is 1.0).
    pub fn adadelta(vs: &VarStore, lr: f64) -> Optimizer {
        Optimizer::with_rule(vs, Arc::new(Adadelta::default()), lr)
    }
    /// `torch.optim.Adamax(params, lr)` with torch's defaults ([`Adamax::default`]; torch's
    /// default rate is 2e-3).
    pub fn adamax(vs: &VarStore, lr: f64) -> Optimizer {
        Optimizer::with_rule(vs, Arc::new(Adamax::default()), lr)
    }
}
