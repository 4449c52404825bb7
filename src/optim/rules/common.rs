//! What the update rules share: the weight decay of a gradient (L2 or decoupled), Adam's two
//! moments (NAdam's and RAdam's), and a rule's state tensors, created as zeros on first use.
use tch::Tensor;

use crate::optim::ops;
use crate::optim::rule::{RuleState, RuleStep};
use crate::Result;

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
pub(super) fn moments(
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
