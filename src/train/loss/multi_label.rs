//! Multi-label classification: `torch.nn.BCEWithLogitsLoss` on multi-hot targets.
use tch::{Reduction, Tensor};

use super::{mean_per_sample, Loss, Task};

/// `torch.nn.BCEWithLogitsLoss(pos_weight=...)`: binary cross-entropy of every label's logit
/// against its 0/1 target (sigmoid and log in one, numerically stable), averaged over every
/// value. `pos_weight` (one weight per label) weighs the positive term, as torch's does.
#[derive(Clone, Debug, Default)]
pub struct BCEWithLogitsLoss {
    /// Weight of the positive examples of each label `[L]` (torch's `pos_weight`; `None`: 1).
    pub pos_weight: Option<Vec<f32>>,
}

impl BCEWithLogitsLoss {
    /// torch's defaults: no `pos_weight`.
    pub fn new() -> Self {
        Self::default()
    }

    fn call(&self, output: &Tensor, target: &Tensor, r: Reduction) -> Tensor {
        let pos = self
            .pos_weight
            .as_ref()
            .map(|w| Tensor::from_slice(w).to_device(output.device()).to_kind(output.kind()));
        output.binary_cross_entropy_with_logits::<Tensor>(target, None, pos, r)
    }
}

impl Loss for BCEWithLogitsLoss {
    fn per_sample(&self, output: &Tensor, target: &Tensor) -> Tensor {
        mean_per_sample(self.call(output, target, Reduction::None))
    }
    fn mean(&self, output: &Tensor, target: &Tensor) -> Tensor {
        self.call(output, target, Reduction::Mean)
    }
    fn task(&self) -> Option<Task> {
        Some(Task::MultiLabel)
    }
}
