//! The single-tensor update of [`Optimizer::step`](super::Optimizer::step) with
//! [`Kernels::PerTensor`](super::Kernels::PerTensor): torch.optim's `foreach=False` loop, a few
//! kernels per parameter, with the optimizer's per-parameter state created as torch creates it.
use tch::Tensor;

use super::kind::OptimizerKind;
use super::state::ParamState;

/// torch.optim's single-tensor update of one parameter. With `found_inf` (GradScaler's flag,
/// SGD only, momentum buffer present) the update is computed as usual, then the parameter and
/// its buffer keep their old values where the flag is 1, and the step does not count: a skipped
/// step without a read on the host.
pub(super) fn update(
    kind: OptimizerKind,
    lr: f64,
    p: &mut Tensor,
    grad: &Tensor,
    st: &mut ParamState,
    found_inf: Option<&Tensor>,
) {
    let skip = found_inf.map(|f| f.ne(0.0));
    match kind {
        OptimizerKind::Sgd { momentum, dampening, nesterov, weight_decay } => {
            let mut d_p =
                if weight_decay != 0.0 { grad + &*p * weight_decay } else { grad.shallow_clone() };
            if momentum != 0.0 {
                let buf = match (st.momentum_buffer.take(), &skip) {
                    (None, _) => d_p.detach().copy(),
                    (Some(mut buf), None) => {
                        let _ = buf.g_mul_scalar_(momentum);
                        let _ = buf.g_add_(&(&d_p * (1.0 - dampening)));
                        buf
                    }
                    (Some(buf), Some(skip)) => {
                        let mut updated = buf.g_mul_scalar(momentum);
                        let _ = updated.g_add_(&(&d_p * (1.0 - dampening)));
                        let _ = buf.where_self_out(&buf, skip, &updated);
                        buf
                    }
                };
                d_p = if nesterov { &d_p + &buf * momentum } else { buf.shallow_clone() };
                st.momentum_buffer = Some(buf);
            }
            if found_inf.is_some() || st.step_tensor.is_some() {
                st.count_on_device(p.device(), found_inf);
            }
            st.step += 1;
            match &skip {
                None => {
                    let _ = p.g_add_(&(d_p * -lr));
                }
                Some(skip) => {
                    let updated = &*p + d_p * -lr;
                    let _ = p.where_self_out(p, skip, &updated);
                }
            }
        }
        OptimizerKind::Adam { beta1, beta2, eps, weight_decay }
        | OptimizerKind::AdamW { beta1, beta2, eps, weight_decay } => {
            st.step += 1;
            let decoupled = matches!(kind, OptimizerKind::AdamW { .. });
            let grad = if decoupled {
                let _ = p.g_mul_scalar_(1.0 - lr * weight_decay);
                grad.shallow_clone()
            } else if weight_decay != 0.0 {
                grad + &*p * weight_decay
            } else {
                grad.shallow_clone()
            };
            let exp_avg = st.exp_avg.get_or_insert_with(|| p.zeros_like());
            let _ = exp_avg.lerp_(&grad, 1.0 - beta1);
            let exp_avg_sq = st.exp_avg_sq.get_or_insert_with(|| p.zeros_like());
            let _ = exp_avg_sq.g_mul_scalar_(beta2);
            let _ = exp_avg_sq.addcmul_(&(&grad * (1.0 - beta2)), &grad);
            let step = st.step as f64;
            let bias_correction1 = 1.0 - beta1.powf(step);
            let bias_correction2 = 1.0 - beta2.powf(step);
            let step_size = lr / bias_correction1;
            let denom = exp_avg_sq.sqrt() / bias_correction2.sqrt() + eps;
            let _ = p.addcdiv_(&(&*exp_avg * -step_size), &denom);
        }
        // An update rule runs its own loop (`Optimizer::rule_step`), never this one.
        OptimizerKind::Rule { .. } => {}
    }
}
