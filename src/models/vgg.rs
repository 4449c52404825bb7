//! torchvision's VGG (configurations A, B, D and E: VGG-11, 13, 16 and 19, each with and
//! without BatchNorm), with its parameter names and order: 3x3 convolutions with ReLU (and
//! BatchNorm after each in the `_bn` variants) between 2x2 max-pooling layers, an adaptive
//! average pooling to 7x7, and a classifier of three linear layers with ReLU and dropout.
use tch::nn::{self, Init, ModuleT};
use tch::Tensor;

use super::batch_norm::{BatchNorm2d, SyncSlot};
use super::layers::{conv2d_zero_bias, linear};
use crate::{Error, Result};

/// A layer of torchvision's `cfgs`: a 3x3 convolution to this many channels, or a max pool.
#[derive(Clone, Copy)]
enum Cfg {
    Conv(i64),
    Pool,
}

use Cfg::{Conv as C, Pool as M};

/// torchvision's configurations "A" (VGG-11), "B" (13), "D" (16) and "E" (19).
const A: &[Cfg] = &[C(64), M, C(128), M, C(256), C(256), M, C(512), C(512), M, C(512), C(512), M];
const B: &[Cfg] =
    &[C(64), C(64), M, C(128), C(128), M, C(256), C(256), M, C(512), C(512), M, C(512), C(512), M];
const D: &[Cfg] = &[
    C(64),
    C(64),
    M,
    C(128),
    C(128),
    M,
    C(256),
    C(256),
    C(256),
    M,
    C(512),
    C(512),
    C(512),
    M,
    C(512),
    C(512),
    C(512),
    M,
];
const E: &[Cfg] = &[
    C(64),
    C(64),
    M,
    C(128),
    C(128),
    M,
    C(256),
    C(256),
    C(256),
    C(256),
    M,
    C(512),
    C(512),
    C(512),
    C(512),
    M,
    C(512),
    C(512),
    C(512),
    C(512),
    M,
];

/// The names [`vgg`] builds.
pub const VGG_NAMES: [&str; 8] =
    ["vgg11", "vgg11_bn", "vgg13", "vgg13_bn", "vgg16", "vgg16_bn", "vgg19", "vgg19_bn"];

/// One layer of `features`.
#[derive(Debug)]
enum Layer {
    Conv(Box<(nn::Conv2D, Option<BatchNorm2d>)>),
    Pool,
}

/// torchvision's VGG, built by [`vgg`].
#[derive(Debug)]
pub struct Vgg {
    features: Vec<Layer>,
    fcs: [nn::Linear; 3],
    dropout: f64,
}

/// torchvision's `vgg11(num_classes=classes)` ... `vgg19_bn` under `path` (`name` one of
/// [`VGG_NAMES`]): its names (`features.*`, `classifier.0`, `.3`, `.6`) and parameter order;
/// initialised as torchvision's (Kaiming-normal convolutions with fan-out and bias 0,
/// BatchNorm weight 1 and bias 0, linear weights normal with std 0.01 and bias 0: the same
/// distributions, not the same draws). Errors: another name.
///
/// ```
/// # fn main() -> trainbook::Result<()> {
/// use tch::nn::{ModuleT, VarStore};
/// use tch::{Device, Kind, Tensor};
/// use trainbook::models::vgg;
/// let vs = VarStore::new(Device::Cpu);
/// let model = vgg(&vs.root(), "vgg11_bn", 10)?;
/// let images = Tensor::zeros([1, 3, 32, 32], (Kind::Float, Device::Cpu));
/// assert_eq!(model.forward_t(&images, false).size(), [1, 10]);
/// # Ok(()) }
/// ```
pub fn vgg(path: &nn::Path, name: &str, classes: i64) -> Result<Vgg> {
    let (cfg, bn) = match name.strip_suffix("_bn").unwrap_or(name) {
        "vgg11" => (A, name.ends_with("_bn")),
        "vgg13" => (B, name.ends_with("_bn")),
        "vgg16" => (D, name.ends_with("_bn")),
        "vgg19" => (E, name.ends_with("_bn")),
        _ => {
            return Err(Error::InvalidArgument(format!(
                "model {name:?}: the VGGs are {}",
                VGG_NAMES.join(", ")
            )))
        }
    };
    let f = path / "features";
    let sync = SyncSlot::default();
    let (mut features, mut index, mut c_in) = (Vec::new(), 0, 3);
    for &layer in cfg {
        match layer {
            Cfg::Pool => {
                features.push(Layer::Pool);
                index += 1;
            }
            Cfg::Conv(c_out) => {
                let config = nn::ConvConfig {
                    padding: 1,
                    ws_init: Init::Kaiming {
                        dist: nn::init::NormalOrUniform::Normal,
                        fan: nn::init::FanInOut::FanOut,
                        non_linearity: nn::init::NonLinearity::ReLU,
                    },
                    ..Default::default()
                };
                let conv = conv2d_zero_bias(&(&f / index), c_in, c_out, 3, config);
                let norm = bn.then(|| BatchNorm2d::new(&f / (index + 1), c_out, &sync));
                features.push(Layer::Conv(Box::new((conv, norm))));
                index += if bn { 3 } else { 2 };
                c_in = c_out;
            }
        }
    }
    let c = path / "classifier";
    let fcs = [
        linear(&(&c / 0), 512 * 7 * 7, 4096),
        linear(&(&c / 3), 4096, 4096),
        linear(&(&c / 6), 4096, classes),
    ];
    tch::no_grad(|| {
        for fc in &fcs {
            let _ = fc.ws.shallow_clone().normal_(0.0, 0.01);
            let _ = fc.bs.as_ref().map(|b| b.shallow_clone().zero_());
        }
    });
    Ok(Vgg { features, fcs, dropout: 0.5 })
}

impl ModuleT for Vgg {
    /// torchvision's `forward`: the features, average pooling to 7x7, flatten, the classifier
    /// (linear, ReLU, dropout, linear, ReLU, dropout, linear).
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let mut x = xs.shallow_clone();
        for layer in &self.features {
            x = match layer {
                Layer::Pool => x.max_pool2d([2, 2], [2, 2], [0, 0], [1, 1], false),
                Layer::Conv(layer) => {
                    let (conv, norm) = &**layer;
                    let y = x.apply(conv);
                    match norm {
                        Some(bn) => y.apply_t(bn, train).relu(),
                        None => y.relu(),
                    }
                }
            };
        }
        let x = x.adaptive_avg_pool2d([7, 7]).flatten(1, -1);
        let x = x.apply(&self.fcs[0]).relu().dropout(self.dropout, train);
        let x = x.apply(&self.fcs[1]).relu().dropout(self.dropout, train);
        x.apply(&self.fcs[2])
    }
}
