//! The multi-tensor update of [`Optimizer::step`](super::Optimizer::step): one group of
//! parameters (same device and dtype) updated by libtorch's `_foreach_*` SGD or `_fused_adam_`
//! kernels, with the optimizer's per-parameter state created the way torch.optim creates it.
use std::collections::BTreeMap;

use tch::{Kind, Tensor};

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
/// update when `found_inf` is 1 (Adam/AdamW only; the caller unscales for SGD). With
/// `skip_if` (GradScaler's found-inf flag, SGD only, every momentum buffer present) the SGD
/// update leaves everything as it was where the flag is 1, without a read on the host.
pub(super) fn step_group(
    kind: OptimizerKind,
    lr: f64,
    group: &[(String, Tensor, Tensor)],
    state: &mut BTreeMap<String, ParamState>,
    scaled: Option<ScaledStep>,
    skip_if: Option<&Tensor>,
) -> Result<()> {
    match kind {
        OptimizerKind::Sgd { momentum, dampening, nesterov, weight_decay } => {
            // Once a step may have been skipped on the device, the step counts live there.
            let on_device = skip_if.is_some()
                || group
                    .iter()
                    .any(|(n, _, _)| state.get(n).is_some_and(|st| st.step_tensor.is_some()));
            let steps: Option<Vec<Tensor>> = on_device.then(|| {
                group
                    .iter()
                    .map(|(n, p, _)| {
                        let st = state.entry(n.clone()).or_default();
                        let host = st.step as f64;
                        st.step_tensor
                            .get_or_insert_with(|| {
                                Tensor::full([], host, (Kind::Float, p.device()))
                            })
                            .shallow_clone()
                    })
                    .collect()
            });
            let mut bufs: Vec<Option<Tensor>> = group
                .iter()
                .map(|(n, _, _)| state.get_mut(n).and_then(|st| st.momentum_buffer.take()))
                .collect();
            let params: Vec<&Tensor> = group.iter().map(|(_, p, _)| p).collect();
            let grads: Vec<&Tensor> = group.iter().map(|(_, _, g)| g).collect();
            let step_refs: Option<Vec<&Tensor>> = steps.as_ref().map(|s| s.iter().collect());
            let result = foreach_sgd(
                &params,
                &grads,
                &mut bufs,
                step_refs.as_deref(),
                SgdArgs { lr, momentum, dampening, nesterov, weight_decay },
                skip_if,
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
        // An update rule runs its own loop (`Optimizer::rule_step`), never this one.
        OptimizerKind::Rule { .. } => {
            Err(crate::Error::InvalidArgument("an update rule has no multi-tensor kernels".into()))
        }
    }
}
