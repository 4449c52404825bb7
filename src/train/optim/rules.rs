//! RMSprop, NAdam and RAdam as [`UpdateRule`]s: torch.optim's single-tensor loops
//! (`_single_tensor_rmsprop`, `_single_tensor_nadam`, `_single_tensor_radam`, torch 2.13) line
//! for line, with torch's defaults; the same kernels, so the same numbers
//! (`tests/parity/optimizer_rules.rs`).
use std::sync::Arc;

use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use super::ops;
use super::rule::{RuleState, RuleStep, SharedRule, UpdateRule};
use super::Optimizer;
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

/// The gradient with an L2 penalty (`grad.add(p, alpha=weight_decay)`), or with the decoupled
/// decay applied to `p` (`p.mul_(1 - lr * weight_decay)`).
pub(super) fn decayed(
    s: &RuleStep,
    p: &mut Tensor,
    grad: &Tensor,
    decoupled: bool,
) -> Result<Tensor> {
    if s.weight_decay == 0.0 {
        Ok(grad.shallow_clone())
    } else if decoupled {
        let _ = p.g_mul_scalar_(1.0 - s.lr * s.weight_decay);
        Ok(grad.shallow_clone())
    } else {
        ops::add(grad, p, s.weight_decay)
    }
}

/// Adam's moments after this step's gradient (`exp_avg.lerp_(grad, 1 - beta1)`,
/// `exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)`), NAdam's and RAdam's alike.
fn moments(
    st: &mut RuleState,
    p: &Tensor,
    grad: &Tensor,
    (beta1, beta2): (f64, f64),
) -> Result<(Tensor, Tensor)> {
    let mut exp_avg = zeros(st, "exp_avg", p);
    let mut exp_avg_sq = zeros(st, "exp_avg_sq", p);
    let _ = exp_avg.lerp_(grad, 1.0 - beta1);
    let _ = exp_avg_sq.g_mul_scalar_(beta2);
    ops::addcmul_(&mut exp_avg_sq, grad, grad, 1.0 - beta2)?;
    Ok((exp_avg, exp_avg_sq))
}

/// The state tensor `name` (zeros like `p` at first), sharing its storage.
pub(super) fn zeros(state: &mut RuleState, name: &str, p: &Tensor) -> Tensor {
    state.get_or_insert_with(name, || p.zeros_like()).shallow_clone()
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
    /// `torch.optim.RMSprop(params, lr)` with torch's defaults ([`RMSprop::default`]); another
    /// setting: `Optimizer::with_rule(vs, Arc::new(RMSprop { momentum: 0.9, ..Default::default() }), lr)`.
    pub fn rmsprop(vs: &VarStore, lr: f64) -> Optimizer {
        Optimizer::with_rule(vs, Arc::new(RMSprop::default()), lr)
    }
    /// `torch.optim.NAdam(params, lr)` with torch's defaults ([`NAdam::default`]).
    pub fn nadam(vs: &VarStore, lr: f64) -> Optimizer {
        Optimizer::with_rule(vs, Arc::new(NAdam::default()), lr)
    }
    /// `torch.optim.RAdam(params, lr)` with torch's defaults ([`RAdam::default`]).
    pub fn radam(vs: &VarStore, lr: f64) -> Optimizer {
        Optimizer::with_rule(vs, Arc::new(RAdam::default()), lr)
    }
}
