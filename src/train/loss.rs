//! Cross-entropy with label smoothing, as `torch.nn.CrossEntropyLoss(label_smoothing=...)`.
use tch::{Reduction, Tensor};

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CrossEntropyLoss {
    pub label_smoothing: f64,
}

impl CrossEntropyLoss {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn label_smoothing(mut self, s: f64) -> Self {
        self.label_smoothing = s;
        self
    }
    /// Mean loss over the batch (what backward uses).
    pub fn mean(&self, logits: &Tensor, labels: &Tensor) -> Tensor {
        logits.cross_entropy_loss::<Tensor>(
            labels,
            None,
            Reduction::Mean,
            -100,
            self.label_smoothing,
        )
    }
    /// Per-sample losses (for exact sums and for excluding padding samples).
    pub fn per_sample(&self, logits: &Tensor, labels: &Tensor) -> Tensor {
        logits.cross_entropy_loss::<Tensor>(
            labels,
            None,
            Reduction::None,
            -100,
            self.label_smoothing,
        )
    }
}
