//! Cross-entropy with label smoothing, as `torch.nn.CrossEntropyLoss(label_smoothing=...)`.
use tch::{Reduction, Tensor};

use super::{Loss, Task};

/// `torch.nn.CrossEntropyLoss(label_smoothing=...)` on logits `[N, C]` and int64 class
/// indices `[N]` (log-softmax and negative log-likelihood in one; `ignore_index` -100, no class
/// weights).
///
/// ```no_run
/// use tch::{Device, Kind, Tensor};
/// use trainbook::train::CrossEntropyLoss;
/// let logits = Tensor::randn([8, 10], (Kind::Float, Device::Cpu));
/// let labels = Tensor::zeros([8], (Kind::Int64, Device::Cpu));
/// let loss = CrossEntropyLoss::new().label_smoothing(0.1).mean(&logits, &labels);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CrossEntropyLoss {
    /// Share of the target probability spread uniformly over all classes, in [0, 1]
    /// (torch's `label_smoothing`; default 0.0).
    pub label_smoothing: f64,
}

impl CrossEntropyLoss {
    /// torch's defaults: no label smoothing.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets [`label_smoothing`](Self::label_smoothing) (e.g. 0.1).
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

impl Loss for CrossEntropyLoss {
    fn per_sample(&self, output: &Tensor, target: &Tensor) -> Tensor {
        CrossEntropyLoss::per_sample(self, output, target)
    }
    fn mean(&self, output: &Tensor, target: &Tensor) -> Tensor {
        CrossEntropyLoss::mean(self, output, target)
    }
    fn task(&self) -> Option<Task> {
        Some(Task::Classification)
    }
}
