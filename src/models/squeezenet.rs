//! torchvision's SqueezeNet 1.0 and 1.1, with its parameter names and order: Fire modules (a
//! 1x1 squeeze convolution, then 1x1 and 3x3 expansions side by side) between max-pooling
//! layers, and a convolutional classifier (dropout, a 1x1 convolution to the classes, ReLU,
//! global average pooling). No BatchNorm.
use tch::nn::{self, Init, ModuleT};
use tch::Tensor;

use super::layers::conv2d_zero_bias;
use crate::{Error, Result};

/// A convolution with bias under `p`, initialised as torchvision's SqueezeNet does: Kaiming
/// uniform (gain sqrt 2, fan-in), bias 0.
fn conv(p: nn::Path, c_in: i64, c_out: i64, k: i64, (stride, padding): (i64, i64)) -> nn::Conv2D {
    let config = nn::ConvConfig {
        stride,
        padding,
        ws_init: Init::Kaiming {
            dist: nn::init::NormalOrUniform::Uniform,
            fan: nn::init::FanInOut::FanIn,
            non_linearity: nn::init::NonLinearity::ReLU,
        },
        ..Default::default()
    };
    conv2d_zero_bias(&p, c_in, c_out, k, config)
}

/// torchvision's `Fire`: squeeze, then the two expansions concatenated.
#[derive(Debug)]
struct Fire {
    squeeze: nn::Conv2D,
    expand1x1: nn::Conv2D,
    expand3x3: nn::Conv2D,
}

impl Fire {
    fn new(p: &nn::Path, c_in: i64, squeeze: i64, e1: i64, e3: i64) -> Fire {
        Fire {
            squeeze: conv(p / "squeeze", c_in, squeeze, 1, (1, 0)),
            expand1x1: conv(p / "expand1x1", squeeze, e1, 1, (1, 0)),
            expand3x3: conv(p / "expand3x3", squeeze, e3, 3, (1, 1)),
        }
    }

    fn forward(&self, xs: &Tensor) -> Tensor {
        let x = xs.apply(&self.squeeze).relu();
        Tensor::cat(&[x.apply(&self.expand1x1).relu(), x.apply(&self.expand3x3).relu()], 1)
    }
}

/// One layer of `features`.
#[derive(Debug)]
enum Layer {
    Conv(Box<nn::Conv2D>),
    Pool,
    Fire(Box<Fire>),
}

/// torchvision's `squeezenet1_0` / `squeezenet1_1`, built by [`squeezenet`].
#[derive(Debug)]
pub struct SqueezeNet {
    features: Vec<Layer>,
    final_conv: nn::Conv2D,
    dropout: f64,
}

/// torchvision's `squeezenet1_0(num_classes=classes)` (`name` `"squeezenet1_0"`) or
/// `squeezenet1_1` under `path`: its names (`features.*`, `classifier.1`) and parameter order;
/// initialised as torchvision's (Kaiming-uniform convolutions, the final one normal with std
/// 0.01, biases 0: the same distributions, not the same draws). Errors: another name.
///
/// ```
/// # fn main() -> trainbook::Result<()> {
/// use tch::nn::{ModuleT, VarStore};
/// use tch::{Device, Kind, Tensor};
/// use trainbook::models::squeezenet;
/// let vs = VarStore::new(Device::Cpu);
/// let model = squeezenet(&vs.root(), "squeezenet1_1", 10)?;
/// let images = Tensor::zeros([2, 3, 64, 64], (Kind::Float, Device::Cpu));
/// assert_eq!(model.forward_t(&images, false).size(), [2, 10]);
/// # Ok(()) }
/// ```
pub fn squeezenet(path: &nn::Path, name: &str, classes: i64) -> Result<SqueezeNet> {
    let f = path / "features";
    let fire = |i: i64, c_in, s, e| Layer::Fire(Box::new(Fire::new(&(&f / i), c_in, s, e, e)));
    let features = match name {
        "squeezenet1_0" => vec![
            Layer::Conv(Box::new(conv(&f / 0, 3, 96, 7, (2, 0)))),
            Layer::Pool,
            fire(3, 96, 16, 64),
            fire(4, 128, 16, 64),
            fire(5, 128, 32, 128),
            Layer::Pool,
            fire(7, 256, 32, 128),
            fire(8, 256, 48, 192),
            fire(9, 384, 48, 192),
            fire(10, 384, 64, 256),
            Layer::Pool,
            fire(12, 512, 64, 256),
        ],
        "squeezenet1_1" => vec![
            Layer::Conv(Box::new(conv(&f / 0, 3, 64, 3, (2, 0)))),
            Layer::Pool,
            fire(3, 64, 16, 64),
            fire(4, 128, 16, 64),
            Layer::Pool,
            fire(6, 128, 32, 128),
            fire(7, 256, 32, 128),
            Layer::Pool,
            fire(9, 256, 48, 192),
            fire(10, 384, 48, 192),
            fire(11, 384, 64, 256),
            fire(12, 512, 64, 256),
        ],
        _ => {
            return Err(Error::InvalidArgument(format!(
                "model {name:?}: the SqueezeNets are squeezenet1_0 and squeezenet1_1"
            )))
        }
    };
    let final_conv = conv(path / "classifier" / 1, 512, classes, 1, (1, 0));
    tch::no_grad(|| {
        let _ = final_conv.ws.shallow_clone().normal_(0.0, 0.01);
    });
    Ok(SqueezeNet { features, final_conv, dropout: 0.5 })
}

impl ModuleT for SqueezeNet {
    /// torchvision's `forward`: the features, then dropout, the final convolution, ReLU and
    /// global average pooling, flattened.
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let mut x = xs.shallow_clone();
        for layer in &self.features {
            x = match layer {
                Layer::Conv(c) => x.apply(&**c).relu(),
                Layer::Pool => x.max_pool2d([3, 3], [2, 2], [0, 0], [1, 1], true),
                Layer::Fire(f) => f.forward(&x),
            };
        }
        let x = x.dropout(self.dropout, train).apply(&self.final_conv).relu();
        x.adaptive_avg_pool2d([1, 1]).flatten(1, -1)
    }
}
