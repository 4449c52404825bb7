//! Regression losses on float targets, as torch's `MSELoss`, `L1Loss`, `HuberLoss` and
//! `SmoothL1Loss` with `reduction="mean"` (the mean over every target value).
use tch::{Reduction, Tensor};

use super::{mean_per_sample, Loss, Task};

/// `torch.nn.MSELoss()`: the mean of `(output - target)^2` over every value.
///
/// ```
/// use tch::Tensor;
/// use trainbook::train::{Loss, MSELoss};
/// let (o, t) = (Tensor::from_slice(&[3.0f32, 0.0]), Tensor::from_slice(&[1.0f32, 0.0]));
/// assert_eq!(Vec::<f32>::try_from(MSELoss.per_sample(&o, &t))?, [4.0, 0.0]);
/// # Ok::<(), tch::TchError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MSELoss;

impl Loss for MSELoss {
    fn per_sample(&self, output: &Tensor, target: &Tensor) -> Tensor {
        mean_per_sample(output.mse_loss(target, Reduction::None))
    }
    fn mean(&self, output: &Tensor, target: &Tensor) -> Tensor {
        output.mse_loss(target, Reduction::Mean)
    }
    fn task(&self) -> Option<Task> {
        Some(Task::Regression)
    }
}

/// `torch.nn.L1Loss()`: the mean of `|output - target|` over every value.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct L1Loss;

impl Loss for L1Loss {
    fn per_sample(&self, output: &Tensor, target: &Tensor) -> Tensor {
        mean_per_sample(output.l1_loss(target, Reduction::None))
    }
    fn mean(&self, output: &Tensor, target: &Tensor) -> Tensor {
        output.l1_loss(target, Reduction::Mean)
    }
    fn task(&self) -> Option<Task> {
        Some(Task::Regression)
    }
}

/// `torch.nn.HuberLoss(delta=...)`: quadratic within `delta` of the target, linear beyond
/// (`0.5 x^2` and `delta (|x| - delta / 2)`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HuberLoss {
    /// Where the loss turns from quadratic to linear (torch's default 1.0).
    pub delta: f64,
}

impl Default for HuberLoss {
    /// torch's default, `delta=1.0`.
    fn default() -> Self {
        HuberLoss { delta: 1.0 }
    }
}

impl Loss for HuberLoss {
    fn per_sample(&self, output: &Tensor, target: &Tensor) -> Tensor {
        mean_per_sample(output.huber_loss(target, Reduction::None, self.delta))
    }
    fn mean(&self, output: &Tensor, target: &Tensor) -> Tensor {
        output.huber_loss(target, Reduction::Mean, self.delta)
    }
    fn task(&self) -> Option<Task> {
        Some(Task::Regression)
    }
}

/// `torch.nn.SmoothL1Loss(beta=...)`: Huber's loss divided by `beta` (`0.5 x^2 / beta` within
/// `beta`, `|x| - beta / 2` beyond).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SmoothL1Loss {
    /// Where the loss turns from quadratic to linear (torch's default 1.0).
    pub beta: f64,
}

impl Default for SmoothL1Loss {
    /// torch's default, `beta=1.0`.
    fn default() -> Self {
        SmoothL1Loss { beta: 1.0 }
    }
}

impl Loss for SmoothL1Loss {
    fn per_sample(&self, output: &Tensor, target: &Tensor) -> Tensor {
        mean_per_sample(output.smooth_l1_loss(target, Reduction::None, self.beta))
    }
    fn mean(&self, output: &Tensor, target: &Tensor) -> Tensor {
        output.smooth_l1_loss(target, Reduction::Mean, self.beta)
    }
    fn task(&self) -> Option<Task> {
        Some(Task::Regression)
    }
}
