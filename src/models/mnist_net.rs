//! The course's MNIST CNN (PyTorch's MNIST example): two 3x3 convolutions, max-pooling,
//! dropout, two linear layers; returns logits for 10 classes. Parameter names match PyTorch
//! (`conv1.weight`, ..., `fc2.bias`).
use super::layers::{conv2d, linear};
use tch::nn::{self, ModuleT};
use tch::Tensor;

#[derive(Debug)]
pub struct MnistNet {
    conv1: nn::Conv2D,
    conv2: nn::Conv2D,
    fc1: nn::Linear,
    fc2: nn::Linear,
}

impl MnistNet {
    /// Registers the parameters under `path` (usually `vs.root()`).
    pub fn new(path: &nn::Path) -> MnistNet {
        MnistNet {
            conv1: conv2d(&(path / "conv1"), 1, 32, 3, Default::default()),
            conv2: conv2d(&(path / "conv2"), 32, 64, 3, Default::default()),
            fc1: linear(&(path / "fc1"), 9216, 128),
            fc2: linear(&(path / "fc2"), 128, 10),
        }
    }
}

impl ModuleT for MnistNet {
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        xs.apply(&self.conv1)
            .relu()
            .apply(&self.conv2)
            .relu()
            .max_pool2d_default(2)
            .dropout(0.25, train)
            .flatten(1, -1)
            .apply(&self.fc1)
            .relu()
            .dropout(0.5, train)
            .apply(&self.fc2)
    }
}
