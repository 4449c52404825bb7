//! torchvision's MobileNetV3 (Large and Small), with its parameter names and order: a stem
//! convolution, inverted residual blocks (a 1x1 expansion, a depthwise convolution, an
//! optional squeeze-and-excitation, a 1x1 projection; ReLU or Hardswish), a last 1x1
//! convolution, and a classifier of two linear layers with Hardswish and dropout between
//! them. BatchNorm with eps 0.001 and momentum 0.01, as torchvision's.
use tch::nn::{self, ModuleT};
use tch::Tensor;

use super::batch_norm::SyncSlot;
use super::conv_norm_act::{conv1x1_bias, Act, ConvBn, Gate, SqueezeExcitation};
use super::layers::linear;
use super::layers::make_divisible;
use crate::{Error, Result};

/// A block's settings (torchvision's `bneck_conf`): input channels, kernel, expanded
/// channels, output channels, squeeze-and-excitation, Hardswish (else ReLU), stride.
type BlockConf = (i64, i64, i64, i64, bool, bool, i64);

/// MobileNetV3-Large's blocks and last channel count.
const LARGE: ([BlockConf; 15], i64) = (
    [
        (16, 3, 16, 16, false, false, 1),
        (16, 3, 64, 24, false, false, 2),
        (24, 3, 72, 24, false, false, 1),
        (24, 5, 72, 40, true, false, 2),
        (40, 5, 120, 40, true, false, 1),
        (40, 5, 120, 40, true, false, 1),
        (40, 3, 240, 80, false, true, 2),
        (80, 3, 200, 80, false, true, 1),
        (80, 3, 184, 80, false, true, 1),
        (80, 3, 184, 80, false, true, 1),
        (80, 3, 480, 112, true, true, 1),
        (112, 3, 672, 112, true, true, 1),
        (112, 5, 672, 160, true, true, 2),
        (160, 5, 960, 160, true, true, 1),
        (160, 5, 960, 160, true, true, 1),
    ],
    1280,
);

/// MobileNetV3-Small's blocks and last channel count.
const SMALL: ([BlockConf; 11], i64) = (
    [
        (16, 3, 16, 16, true, false, 2),
        (16, 3, 72, 24, false, false, 2),
        (24, 3, 88, 24, false, false, 1),
        (24, 5, 96, 40, true, true, 2),
        (40, 5, 240, 40, true, true, 1),
        (40, 5, 240, 40, true, true, 1),
        (40, 5, 120, 48, true, true, 1),
        (48, 5, 144, 48, true, true, 1),
        (48, 5, 288, 96, true, true, 2),
        (96, 5, 576, 96, true, true, 1),
        (96, 5, 576, 96, true, true, 1),
    ],
    1024,
);

/// MobileNetV3's BatchNorm: eps 0.001, momentum 0.01.
const BN: (f64, f64) = (0.001, 0.01);

/// torchvision's `InvertedResidual` (`block.0`, `block.1`, ...).
#[derive(Debug)]
struct InvertedResidual {
    expand: Option<ConvBn>,
    depthwise: ConvBn,
    se: Option<SqueezeExcitation>,
    project: ConvBn,
    residual: bool,
}

impl InvertedResidual {
    fn new(p: &nn::Path, conf: BlockConf, sync: &SyncSlot) -> InvertedResidual {
        let (c_in, k, expanded, c_out, use_se, hardswish, stride) = conf;
        let act = if hardswish { Act::Hardswish } else { Act::Relu };
        let block = p / "block";
        let mut i = 0;
        let mut next = || {
            i += 1;
            &block / (i - 1)
        };
        let expand = (expanded != c_in)
            .then(|| ConvBn::new(&next(), (c_in, expanded, 1, 1, 1), act, sync, BN));
        let depthwise =
            ConvBn::new(&next(), (expanded, expanded, k, stride, expanded), act, sync, BN);
        let se = use_se.then(|| {
            let p = next();
            let squeeze = make_divisible((expanded / 4) as f64, 8);
            SqueezeExcitation {
                fc1: conv1x1_bias(&p / "fc1", expanded, squeeze),
                fc2: conv1x1_bias(&p / "fc2", squeeze, expanded),
                act: Act::Relu,
                gate: Gate::Hardsigmoid,
            }
        });
        let project = ConvBn::new(&next(), (expanded, c_out, 1, 1, 1), Act::None, sync, BN);
        InvertedResidual { expand, depthwise, se, project, residual: stride == 1 && c_in == c_out }
    }

    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let mut y = match &self.expand {
            Some(e) => e.forward_t(xs, train),
            None => xs.shallow_clone(),
        };
        y = self.depthwise.forward_t(&y, train);
        if let Some(se) = &self.se {
            y = se.forward(&y);
        }
        let mut y = self.project.forward_t(&y, train);
        if self.residual {
            let _ = y.g_add_(xs);
        }
        y
    }
}

/// torchvision's `mobilenet_v3_large` / `mobilenet_v3_small` (width multiplier 1.0), built
/// by [`mobilenet_v3`].
#[derive(Debug)]
pub struct MobileNetV3 {
    stem: ConvBn,
    blocks: Vec<InvertedResidual>,
    last: ConvBn,
    fc1: nn::Linear,
    fc2: nn::Linear,
    dropout: f64,
}

/// torchvision's `mobilenet_v3_large(num_classes=classes)` (`name` `"mobilenet_v3_large"`)
/// or `mobilenet_v3_small` under `path`: its names (`features.*`, `classifier.0`,
/// `classifier.3`) and parameter order; initialised as torchvision's (Kaiming-normal
/// convolutions, BatchNorm weight 1 and bias 0, linear weights normal with std 0.01 and bias 0:
/// the same distributions, not the same draws). Errors: another name.
///
/// ```
/// # fn main() -> trainbook::Result<()> {
/// use tch::nn::{ModuleT, VarStore};
/// use tch::{Device, Kind, Tensor};
/// use trainbook::models::mobilenet_v3;
/// let vs = VarStore::new(Device::Cpu);
/// let model = mobilenet_v3(&vs.root(), "mobilenet_v3_small", 10)?;
/// let images = Tensor::zeros([2, 3, 64, 64], (Kind::Float, Device::Cpu));
/// assert_eq!(model.forward_t(&images, false).size(), [2, 10]);
/// # Ok(()) }
/// ```
pub fn mobilenet_v3(path: &nn::Path, name: &str, classes: i64) -> Result<MobileNetV3> {
    let (blocks, last_channel): (&[BlockConf], i64) = match name {
        "mobilenet_v3_large" => (&LARGE.0, LARGE.1),
        "mobilenet_v3_small" => (&SMALL.0, SMALL.1),
        _ => {
            return Err(Error::InvalidArgument(format!(
                "model {name:?}: the MobileNetV3s are mobilenet_v3_large and mobilenet_v3_small"
            )))
        }
    };
    let sync = SyncSlot::default();
    let features = path / "features";
    let first = blocks[0].0;
    let stem = ConvBn::new(&(&features / 0), (3, first, 3, 2, 1), Act::Hardswish, &sync, BN);
    let blocks: Vec<InvertedResidual> = blocks
        .iter()
        .enumerate()
        .map(|(i, &conf)| InvertedResidual::new(&(&features / (i + 1)), conf, &sync))
        .collect();
    let c_last = blocks.last().map_or(first, |b| b.project.out_channels());
    let lastconv = 6 * c_last;
    let last = ConvBn::new(
        &(&features / (blocks.len() + 1)),
        (c_last, lastconv, 1, 1, 1),
        Act::Hardswish,
        &sync,
        BN,
    );
    let classifier = path / "classifier";
    let (fc1, fc2) = (
        linear(&(&classifier / 0), lastconv, last_channel),
        linear(&(&classifier / 3), last_channel, classes),
    );
    tch::no_grad(|| {
        for fc in [&fc1, &fc2] {
            let _ = fc.ws.shallow_clone().normal_(0.0, 0.01);
            let _ = fc.bs.as_ref().map(|b| b.shallow_clone().zero_());
        }
    });
    Ok(MobileNetV3 { stem, blocks, last, fc1, fc2, dropout: 0.2 })
}

impl ModuleT for MobileNetV3 {
    /// torchvision's `forward`: features, global average pooling, flatten, classifier.
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let mut x = self.stem.forward_t(xs, train);
        for b in &self.blocks {
            x = b.forward_t(&x, train);
        }
        let x = self.last.forward_t(&x, train).adaptive_avg_pool2d([1, 1]).flatten(1, -1);
        x.apply(&self.fc1).hardswish().dropout(self.dropout, train).apply(&self.fc2)
    }
}
