//! torchvision's DenseNet-121, 161, 169 and 201 (DenseNet-BC), with its parameter names and
//! order: a 7x7 stem with max pooling, four dense blocks whose layers (BatchNorm, ReLU, a 1x1
//! bottleneck convolution, BatchNorm, ReLU, a 3x3 convolution) each see the concatenation of
//! all earlier outputs, transitions (BatchNorm, ReLU, a 1x1 convolution halving the channels,
//! 2x2 average pooling) between them, a last BatchNorm, and a linear classifier.
use tch::nn::{self, Init, ModuleT};
use tch::Tensor;

use super::batch_norm::{BatchNorm2d, SyncSlot};
use super::layers::linear;
use crate::{Error, Result};

/// The names [`densenet`] builds.
pub const DENSENET_NAMES: [&str; 4] = ["densenet121", "densenet161", "densenet169", "densenet201"];

/// Each name's growth rate, layers per block and stem channels (torchvision's `_densenet`).
fn config(name: &str) -> Option<(i64, [i64; 4], i64)> {
    Some(match name {
        "densenet121" => (32, [6, 12, 24, 16], 64),
        "densenet161" => (48, [6, 12, 36, 24], 96),
        "densenet169" => (32, [6, 12, 32, 32], 64),
        "densenet201" => (32, [6, 12, 48, 32], 64),
        _ => return None,
    })
}

/// A convolution without bias, Kaiming normal with fan-in (torchvision's DenseNet init).
fn conv(p: nn::Path, c_in: i64, c_out: i64, k: i64, (stride, padding): (i64, i64)) -> nn::Conv2D {
    let config = nn::ConvConfig {
        stride,
        padding,
        bias: false,
        ws_init: Init::Kaiming {
            dist: nn::init::NormalOrUniform::Normal,
            fan: nn::init::FanInOut::FanIn,
            non_linearity: nn::init::NonLinearity::ReLU,
        },
        ..Default::default()
    };
    nn::conv2d(p, c_in, c_out, k, config)
}

/// torchvision's `_DenseLayer` (`norm1`, `conv1`, `norm2`, `conv2`; no dropout, its default).
#[derive(Debug)]
struct DenseLayer {
    norm1: BatchNorm2d,
    conv1: nn::Conv2D,
    norm2: BatchNorm2d,
    conv2: nn::Conv2D,
}

impl DenseLayer {
    fn new(p: &nn::Path, c_in: i64, growth: i64, sync: &SyncSlot) -> DenseLayer {
        let bottleneck = 4 * growth; // bn_size 4
        DenseLayer {
            norm1: BatchNorm2d::new(p / "norm1", c_in, sync),
            conv1: conv(p / "conv1", c_in, bottleneck, 1, (1, 0)),
            norm2: BatchNorm2d::new(p / "norm2", bottleneck, sync),
            conv2: conv(p / "conv2", bottleneck, growth, 3, (1, 1)),
        }
    }

    /// The new features from the concatenation of all earlier ones.
    fn forward_t(&self, earlier: &[Tensor], train: bool) -> Tensor {
        let x = Tensor::cat(earlier, 1).apply_t(&self.norm1, train).relu().apply(&self.conv1);
        x.apply_t(&self.norm2, train).relu().apply(&self.conv2)
    }
}

/// torchvision's `_Transition`: BatchNorm, ReLU, a 1x1 convolution, 2x2 average pooling.
#[derive(Debug)]
struct Transition {
    norm: BatchNorm2d,
    conv: nn::Conv2D,
}

/// torchvision's DenseNet, built by [`densenet`].
#[derive(Debug)]
pub struct DenseNet {
    conv0: nn::Conv2D,
    norm0: BatchNorm2d,
    blocks: Vec<(Vec<DenseLayer>, Option<Transition>)>,
    norm5: BatchNorm2d,
    classifier: nn::Linear,
}

/// torchvision's `densenet121(num_classes=classes)` ... `densenet201` under `path` (`name`
/// one of [`DENSENET_NAMES`]): its names (`features.denseblock<i>.denselayer<j>.*`,
/// `features.transition<i>.*`, `features.norm5`, `classifier`) and parameter order;
/// initialised as torchvision's (Kaiming-normal convolutions with fan-in, BatchNorm weight 1
/// and bias 0, the linear weight as PyTorch's default and bias 0: the same distributions, not
/// the same draws). Errors: another name.
///
/// ```
/// # fn main() -> trainbook::Result<()> {
/// use tch::nn::{ModuleT, VarStore};
/// use tch::{Device, Kind, Tensor};
/// use trainbook::models::densenet;
/// let vs = VarStore::new(Device::Cpu);
/// let model = densenet(&vs.root(), "densenet121", 10)?;
/// let images = Tensor::zeros([1, 3, 64, 64], (Kind::Float, Device::Cpu));
/// assert_eq!(model.forward_t(&images, false).size(), [1, 10]);
/// # Ok(()) }
/// ```
pub fn densenet(path: &nn::Path, name: &str, classes: i64) -> Result<DenseNet> {
    let (growth, layers, stem) = config(name).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "model {name:?}: the DenseNets are {}",
            DENSENET_NAMES.join(", ")
        ))
    })?;
    let f = path / "features";
    let sync = SyncSlot::default();
    let conv0 = conv(&f / "conv0", 3, stem, 7, (2, 3));
    let norm0 = BatchNorm2d::new(&f / "norm0", stem, &sync);
    let mut channels = stem;
    let mut blocks = Vec::new();
    for (i, &n) in layers.iter().enumerate() {
        let block = &f / format!("denseblock{}", i + 1);
        let dense: Vec<DenseLayer> = (0..n)
            .map(|j| {
                let p = &block / format!("denselayer{}", j + 1);
                DenseLayer::new(&p, channels + j * growth, growth, &sync)
            })
            .collect();
        channels += n * growth;
        let transition = (i + 1 < layers.len()).then(|| {
            let p = &f / format!("transition{}", i + 1);
            let t = Transition {
                norm: BatchNorm2d::new(&p / "norm", channels, &sync),
                conv: conv(&p / "conv", channels, channels / 2, 1, (1, 0)),
            };
            channels /= 2;
            t
        });
        blocks.push((dense, transition));
    }
    let norm5 = BatchNorm2d::new(&f / "norm5", channels, &sync);
    let classifier = linear(&(path / "classifier"), channels, classes);
    tch::no_grad(|| {
        let _ = classifier.bs.as_ref().map(|b| b.shallow_clone().zero_());
    });
    Ok(DenseNet { conv0, norm0, blocks, norm5, classifier })
}

impl ModuleT for DenseNet {
    /// torchvision's `forward`: the features, ReLU, global average pooling, flatten, the
    /// classifier.
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let mut x = xs.apply(&self.conv0).apply_t(&self.norm0, train).relu();
        x = x.max_pool2d([3, 3], [2, 2], [1, 1], [1, 1], false);
        for (dense, transition) in &self.blocks {
            let mut features = vec![x];
            for layer in dense {
                let new = layer.forward_t(&features, train);
                features.push(new);
            }
            x = Tensor::cat(&features, 1);
            if let Some(t) = transition {
                x = x.apply_t(&t.norm, train).relu().apply(&t.conv);
                x = x.avg_pool2d([2, 2], [2, 2], [0, 0], false, true, None::<i64>);
            }
        }
        let x = x.apply_t(&self.norm5, train).relu();
        x.adaptive_avg_pool2d([1, 1]).flatten(1, -1).apply(&self.classifier)
    }
}
