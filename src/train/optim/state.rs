//! An optimizer's state: the per-parameter buffers (step count, Adam's moments, SGD's momentum
//! buffer) that [`Optimizer`](super::Optimizer) keeps, and [`OptimizerMeta`], the non-tensor
//! part it exports beside the state tensors (checkpoints save both, so a resumed run continues
//! exactly).
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tch::Tensor;

use super::kind::OptimizerKind;

/// One parameter's state, created on its first step as torch.optim creates it.
#[derive(Default)]
pub(super) struct ParamState {
    /// Steps taken (host count); with fused Adam the device scalar `step_tensor` is the truth.
    pub(super) step: u64,
    /// Fused Adam's step count (a float32 scalar on the parameter's device, as in torch).
    pub(super) step_tensor: Option<Tensor>,
    pub(super) exp_avg: Option<Tensor>,
    pub(super) exp_avg_sq: Option<Tensor>,
    pub(super) momentum_buffer: Option<Tensor>,
}

/// The non-tensor part of an optimizer's state (kind, learning rate, step counts), saved next
/// to the state tensors (in a checkpoint's manifest).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OptimizerMeta {
    /// The update rule and hyper-parameters; a restore into another rule is refused.
    /// `None` accepts any optimizer.
    pub kind: Option<OptimizerKind>,
    /// The learning rate at export, restored by
    /// [`Optimizer::load_state_dict`](super::Optimizer::load_state_dict).
    pub lr: f64,
    /// Steps taken by each parameter, by name (torch's `state[p]["step"]`).
    pub steps: BTreeMap<String, u64>,
}

impl ParamState {
    /// The step count: the device scalar's value when fused Adam keeps one (a read from the
    /// device, done only when the state is exported), else the host count.
    pub(super) fn current_step(&self) -> u64 {
        self.step_tensor.as_ref().map_or(self.step, |t| t.double_value(&[]).round() as u64)
    }
    /// Folds a device step count back into the host count (leaving fused Adam).
    pub(super) fn sync_step(&mut self) {
        if self.step_tensor.is_some() {
            self.step = self.current_step();
            self.step_tensor = None;
        }
    }
}
