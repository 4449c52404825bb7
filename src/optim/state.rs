//! An optimizer's state: the per-parameter buffers (step count, Adam's moments, SGD's momentum
//! buffer) that [`Optimizer`](super::Optimizer) keeps, and [`OptimizerMeta`], the non-tensor
//! part it exports beside the state tensors (checkpoints save both, so a resumed run continues
//! exactly).
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use super::kind::OptimizerKind;
use super::rule::RuleState;

/// One parameter's state, created on its first step as torch.optim creates it.
#[derive(Default)]
pub(super) struct ParamState {
    /// Steps taken (host count); once `step_tensor` exists, it is the truth.
    pub(super) step: u64,
    /// The step count on the parameter's device (a float32 scalar): fused Adam's, as in torch,
    /// and SGD's once GradScaler has skipped (or not) a step on the device, which the host
    /// cannot know without a read.
    pub(super) step_tensor: Option<Tensor>,
    pub(super) exp_avg: Option<Tensor>,
    pub(super) exp_avg_sq: Option<Tensor>,
    pub(super) momentum_buffer: Option<Tensor>,
    /// An update rule's own tensors.
    pub(super) rule: RuleState,
}

/// The non-tensor part of an optimizer's state (kind, learning rate, step counts), saved next
/// to the state tensors (in a checkpoint's manifest).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OptimizerMeta {
    /// The update rule and hyper-parameters; a restore into another rule is refused.
    /// `None` accepts any optimizer.
    pub kind: Option<OptimizerKind>,
    /// The learning rate at export (the default group's), restored by
    /// [`Optimizer::load_state_dict`](super::Optimizer::load_state_dict) into every group
    /// unless `group_lrs` is given.
    pub lr: f64,
    /// Each param group's rate at export when there is more than one group (empty otherwise);
    /// a restore needs the same number of groups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub group_lrs: Vec<f64>,
    /// Steps taken by each parameter, by name (torch's `state[p]["step"]`).
    pub steps: BTreeMap<String, u64>,
    /// The [`UpdateRule`](crate::train::UpdateRule)'s name, for an optimizer with one; a
    /// restore into another rule is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

impl ParamState {
    /// The step count: the device scalar's value when fused Adam keeps one (a read from the
    /// device, done only when the state is exported), else the host count.
    pub(super) fn current_step(&self) -> u64 {
        self.step_tensor.as_ref().map_or(self.step, |t| t.double_value(&[]).round() as u64)
    }
    /// Counts a step in the device count (made from the host count when there is none yet):
    /// +1, or +0 where GradScaler's `found_inf` is 1.
    pub(super) fn count_on_device(&mut self, device: Device, found_inf: Option<&Tensor>) {
        let host = self.step as f64;
        let count =
            self.step_tensor.get_or_insert_with(|| Tensor::full([], host, (Kind::Float, device)));
        let _ = count.g_add_scalar_(1.0);
        if let Some(found_inf) = found_inf {
            let _ = count.g_sub_(found_inf);
        }
    }
    /// Folds a device step count back into the host count (leaving fused Adam).
    pub(super) fn sync_step(&mut self) {
        if self.step_tensor.is_some() {
            self.step = self.current_step();
            self.step_tensor = None;
        }
    }
}
