//! torchvision's AlexNet, with its parameter names and order: five convolutions with ReLU and
//! three max-pooling layers, an adaptive average pooling to 6x6, and a classifier of three
//! linear layers with dropout before the first two. PyTorch's default initialisation, as
//! torchvision's (it sets none of its own).
use tch::nn::{self, ModuleT};
use tch::Tensor;

use super::layers::{conv2d, linear};
use crate::{Error, Result};

/// torchvision's `alexnet`, built by [`alexnet`].
#[derive(Debug)]
pub struct AlexNet {
    convs: Vec<nn::Conv2D>,
    fcs: [nn::Linear; 3],
    dropout: f64,
}

/// torchvision's `alexnet(num_classes=classes)` under `path` (`name` `"alexnet"`): its names
/// (`features.0` ... `features.10`, `classifier.1`, `.4`, `.6`) and parameter order,
/// initialised as PyTorch's layers are by default (the same draws, in the same order, from
/// the same seed). Errors: another name.
///
/// ```
/// # fn main() -> trainbook::Result<()> {
/// use tch::nn::{ModuleT, VarStore};
/// use tch::{Device, Kind, Tensor};
/// use trainbook::models::alexnet;
/// let vs = VarStore::new(Device::Cpu);
/// let model = alexnet(&vs.root(), "alexnet", 10)?;
/// let images = Tensor::zeros([1, 3, 64, 64], (Kind::Float, Device::Cpu));
/// assert_eq!(model.forward_t(&images, false).size(), [1, 10]);
/// # Ok(()) }
/// ```
pub fn alexnet(path: &nn::Path, name: &str, classes: i64) -> Result<AlexNet> {
    if name != "alexnet" {
        return Err(Error::InvalidArgument(format!("model {name:?}: not alexnet")));
    }
    let f = path / "features";
    let conv = |i: i64, c_in, c_out, k, stride, padding| {
        let config = nn::ConvConfig { stride, padding, ..Default::default() };
        conv2d(&(&f / i), c_in, c_out, k, config)
    };
    let convs = vec![
        conv(0, 3, 64, 11, 4, 2),
        conv(3, 64, 192, 5, 1, 2),
        conv(6, 192, 384, 3, 1, 1),
        conv(8, 384, 256, 3, 1, 1),
        conv(10, 256, 256, 3, 1, 1),
    ];
    let c = path / "classifier";
    let fcs = [
        linear(&(&c / 1), 256 * 6 * 6, 4096),
        linear(&(&c / 4), 4096, 4096),
        linear(&(&c / 6), 4096, classes),
    ];
    Ok(AlexNet { convs, fcs, dropout: 0.5 })
}

impl ModuleT for AlexNet {
    /// torchvision's `forward`: the features (max pooling after the first, second and fifth
    /// convolution), average pooling to 6x6, flatten, the classifier.
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let pool = |x: Tensor| x.max_pool2d([3, 3], [2, 2], [0, 0], [1, 1], false);
        let mut x = xs.shallow_clone();
        for (i, c) in self.convs.iter().enumerate() {
            x = x.apply(c).relu();
            if matches!(i, 0 | 1 | 4) {
                x = pool(x);
            }
        }
        let x = x.adaptive_avg_pool2d([6, 6]).flatten(1, -1);
        let x = x.dropout(self.dropout, train).apply(&self.fcs[0]).relu();
        let x = x.dropout(self.dropout, train).apply(&self.fcs[1]).relu();
        x.apply(&self.fcs[2])
    }
}
