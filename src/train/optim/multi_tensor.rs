//! The multi-tensor update of [`Optimizer::step`](super::Optimizer::step): one group of
//! parameters (same device and dtype) updated by libtorch's `_foreach_*` SGD or `_fused_adam_`
//! kernels, with the optimizer's per-parameter state created the way torch.optim creates it.
use std::collections::BTreeMap;

use tch::Tensor;

use super::kernels::{foreach_sgd, fused_adam, AdamArgs, AdamLists, SgdArgs};
use super::kind::OptimizerKind;
use super::state::ParamState;
use crate::Result;

/// GradScaler's tensors for a fused step: the current scale and the found-inf flag.
pub(super) struct ScaledStep<'a> {
    pub grad_scale: &'a Tensor,
    pub found_inf: &'a Tensor,
}

/// Updates `group` (name, parameter, gradient) in place. With `scaled`, the gradients are
/// still multiplied by the loss scale: the fused kernel divides them and skips the whole
/// update when `found_inf` is 1 (Adam/AdamW only; the caller unscales for SGD).
pub(super) fn step_group(
    kind: OptimizerKind,
    lr: f64,
    group: &[(String, Tensor, Tensor)],
    state: &mut BTreeMap<String, ParamState>,
    scaled: Option<ScaledStep>,
) -> Result<()> {
    match kind {
        OptimizerKind::Sgd { momentum, dampening, nesterov, weight_decay } => {
            let mut bufs: Vec<Option<Tensor>> = group
                .iter()
                .map(|(n, _, _)| state.get_mut(n).and_then(|st| st.momentum_buffer.take()))
                .collect();
            let params: Vec<&Tensor> = group.iter().map(|(_, p, _)| p).collect();
            let grads: Vec<&Tensor> = group.iter().map(|(_, _, g)| g).collect();
            let result = foreach_sgd(
                &params,
                &grads,
                &mut bufs,
                SgdArgs { lr, momentum, dampening, nesterov, weight_decay },
            );
            // The buffers go back even when the kernel failed, so nothing of the state is lost.
            for ((name, _, _), buf) in group.iter().zip(bufs) {
                let st = state.entry(name.clone()).or_default();
                st.momentum_buffer = buf;
                if result.is_ok() {
                    st.step += 1;
                }
            }
            result
        }
        OptimizerKind::Adam { beta1, beta2, eps, weight_decay }
        | OptimizerKind::AdamW { beta1, beta2, eps, weight_decay } => {
            for (name, p, _) in group {
                let st = state.entry(name.clone()).or_default();
                st.exp_avg.get_or_insert_with(|| p.zeros_like());
                st.exp_avg_sq.get_or_insert_with(|| p.zeros_like());
                if st.step_tensor.is_none() {
                    // torch.optim keeps a fused step as a float32 scalar on the parameter's device.
                    st.step_tensor = Some(Tensor::from(st.step as f32).to_device(p.device()));
                }
                st.step += 1;
            }
            let states: Vec<&ParamState> =
                group.iter().filter_map(|(n, _, _)| state.get(n)).collect();
            let pick = |f: fn(&ParamState) -> Option<&Tensor>| {
                states.iter().filter_map(|st| f(st)).collect::<Vec<_>>()
            };
            let lists = AdamLists {
                params: group.iter().map(|(_, p, _)| p).collect(),
                grads: group.iter().map(|(_, _, g)| g).collect(),
                exp_avgs: pick(|st| st.exp_avg.as_ref()),
                exp_avg_sqs: pick(|st| st.exp_avg_sq.as_ref()),
                steps: pick(|st| st.step_tensor.as_ref()),
            };
            let args = AdamArgs {
                lr,
                beta1,
                beta2,
                weight_decay,
                eps,
                decoupled: matches!(kind, OptimizerKind::AdamW { .. }),
            };
            let (grad_scale, found_inf) =
                scaled.map_or((None, None), |s| (Some(s.grad_scale), Some(s.found_inf)));
            fused_adam(&lists, args, grad_scale, found_inf)
        }
    }
}
