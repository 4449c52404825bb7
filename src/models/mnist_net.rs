//! The course's MNIST CNN (PyTorch's MNIST example): two 3x3 convolutions, max-pooling,
//! dropout, two linear layers; returns logits for 10 classes. Parameter names match PyTorch
//! (`conv1.weight`, ..., `fc2.bias`).
use super::layers::{conv2d, linear};
use tch::nn::{self, ModuleT};
use tch::Tensor;

/// PyTorch's MNIST example network (`examples/mnist/main.py`'s `Net`): `conv1` 1->32 (3x3),
/// ReLU, `conv2` 32->64 (3x3), ReLU, 2x2 max-pool, dropout 0.25, `fc1` 9216->128, ReLU,
/// dropout 0.5, `fc2` 128->10 ([`with_outputs`](Self::with_outputs) for another
/// count). Takes `[N, 1, 28, 28]` images and returns `[N, 10]` logits
/// (no softmax: pair it with [`CrossEntropyLoss`](crate::train::CrossEntropyLoss)).
/// `forward_t(x, train)` applies dropout only when `train` is true.
///
/// # Example
///
/// ```no_run
/// # fn main() -> trainbook::Result<()> {
/// use tch::nn::{ModuleT, VarStore};
/// use tch::{Device, Kind, Tensor};
/// use trainbook::models::MnistNet;
/// let vs = VarStore::new(Device::Cpu);
/// let net = MnistNet::new(&vs.root());
/// let images = Tensor::zeros([64, 1, 28, 28], (Kind::Float, Device::Cpu));
/// let logits = net.forward_t(&images, false);
/// assert_eq!(logits.size(), [64, 10]);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct MnistNet {
    conv1: nn::Conv2D,
    conv2: nn::Conv2D,
    fc1: nn::Linear,
    fc2: nn::Linear,
}

impl MnistNet {
    /// Registers the parameters under `path` (usually `vs.root()`), initialised as PyTorch's
    /// `Net` is, draw for draw: after `tch::manual_seed(s)` they equal PyTorch's after
    /// `torch.manual_seed(s)` (see [`linear`](super::linear)).
    pub fn new(path: &nn::Path) -> MnistNet {
        MnistNet::with_outputs(path, 10)
    }

    /// The same network with `outputs` outputs from `fc2`: 1 for a regression head that
    /// predicts one number (the digit's value, say; examples/mnist_regression.rs).
    pub fn with_outputs(path: &nn::Path, outputs: i64) -> MnistNet {
        MnistNet {
            conv1: conv2d(&(path / "conv1"), 1, 32, 3, Default::default()),
            conv2: conv2d(&(path / "conv2"), 32, 64, 3, Default::default()),
            fc1: linear(&(path / "fc1"), 9216, 128),
            fc2: linear(&(path / "fc2"), 128, outputs),
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
