//! torchvision's MobileNetV2, with its parameter names and order: a stem convolution, 17
//! inverted residual blocks (a 1x1 expansion, a depthwise convolution, both with ReLU6, and a
//! linear 1x1 projection; a shortcut where the shape allows), a last 1x1 convolution to 1280
//! channels, and a classifier of dropout and one linear layer. BatchNorm with PyTorch's
//! defaults (eps 1e-5, momentum 0.1), as torchvision's.
use tch::nn::{self, ModuleT};
use tch::Tensor;

use super::batch_norm::{BatchNorm2d, SyncSlot};
use super::conv_norm_act::{conv, pooled_head, Act, ConvBn};
use super::layers::linear;
use crate::{Error, Result};

/// PyTorch's BatchNorm defaults: eps 1e-5, momentum 0.1.
const BN: (f64, f64) = (1e-5, 0.1);

/// torchvision's `inverted_residual_setting`: expansion t, output channels c, repeats n,
/// first stride s.
const SETTING: [(i64, i64, usize, i64); 7] = [
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
];

/// torchvision's MobileNetV2 `InvertedResidual` (`conv.0`, `conv.1`, ...).
#[derive(Debug)]
struct InvertedResidual {
    expand: Option<ConvBn>,
    depthwise: ConvBn,
    project: nn::Conv2D,
    project_bn: BatchNorm2d,
    residual: bool,
}

impl InvertedResidual {
    fn new(p: &nn::Path, (c_in, c_out, stride, t): (i64, i64, i64, i64), sync: &SyncSlot) -> Self {
        let hidden = c_in * t;
        let layers = p / "conv";
        let mut i = 0;
        let mut next = || {
            i += 1;
            &layers / (i - 1)
        };
        let expand =
            (t != 1).then(|| ConvBn::new(&next(), (c_in, hidden, 1, 1, 1), Act::Relu6, sync, BN));
        let depthwise =
            ConvBn::new(&next(), (hidden, hidden, 3, stride, hidden), Act::Relu6, sync, BN);
        let project = conv(next(), (hidden, c_out, 1, 1, 1));
        let project_bn = BatchNorm2d::with(next(), c_out, sync, BN);
        InvertedResidual {
            expand,
            depthwise,
            project,
            project_bn,
            residual: stride == 1 && c_in == c_out,
        }
    }

    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let y = match &self.expand {
            Some(e) => e.forward_t(xs, train),
            None => xs.shallow_clone(),
        };
        let y = self.depthwise.forward_t(&y, train);
        let y = y.apply(&self.project).apply_t(&self.project_bn, train);
        if self.residual {
            xs + y
        } else {
            y
        }
    }
}

/// torchvision's `mobilenet_v2` (width multiplier 1.0), built by [`mobilenet_v2`].
#[derive(Debug)]
pub struct MobileNetV2 {
    stem: ConvBn,
    blocks: Vec<InvertedResidual>,
    last: ConvBn,
    fc: nn::Linear,
    dropout: f64,
}

/// torchvision's `mobilenet_v2(num_classes=classes)` under `path` (`name` `"mobilenet_v2"`):
/// its names (`features.*`, `classifier.1`) and parameter order; initialised as torchvision's
/// (Kaiming-normal convolutions with fan-out, BatchNorm weight 1 and bias 0, the linear weight
/// normal with std 0.01 and bias 0: the same distributions, not the same draws). Errors:
/// another name.
///
/// ```
/// # fn main() -> trainbook::Result<()> {
/// use tch::nn::{ModuleT, VarStore};
/// use tch::{Device, Kind, Tensor};
/// use trainbook::models::mobilenet_v2;
/// let vs = VarStore::new(Device::Cpu);
/// let model = mobilenet_v2(&vs.root(), "mobilenet_v2", 10)?;
/// let images = Tensor::zeros([2, 3, 64, 64], (Kind::Float, Device::Cpu));
/// assert_eq!(model.forward_t(&images, false).size(), [2, 10]);
/// # Ok(()) }
/// ```
pub fn mobilenet_v2(path: &nn::Path, name: &str, classes: i64) -> Result<MobileNetV2> {
    if name != "mobilenet_v2" {
        return Err(Error::InvalidArgument(format!("model {name:?}: not mobilenet_v2")));
    }
    let sync = SyncSlot::default();
    let features = path / "features";
    let stem = ConvBn::new(&(&features / 0), (3, 32, 3, 2, 1), Act::Relu6, &sync, BN);
    let mut blocks = Vec::new();
    let mut c_in = 32;
    for (t, c, n, s) in SETTING {
        for k in 0..n {
            let stride = if k == 0 { s } else { 1 };
            let p = &features / (blocks.len() + 1);
            blocks.push(InvertedResidual::new(&p, (c_in, c, stride, t), &sync));
            c_in = c;
        }
    }
    let last = ConvBn::new(
        &(&features / (blocks.len() + 1)),
        (c_in, 1280, 1, 1, 1),
        Act::Relu6,
        &sync,
        BN,
    );
    let fc = linear(&(path / "classifier" / 1), 1280, classes);
    tch::no_grad(|| {
        let _ = fc.ws.shallow_clone().normal_(0.0, 0.01);
        let _ = fc.bs.as_ref().map(|b| b.shallow_clone().zero_());
    });
    Ok(MobileNetV2 { stem, blocks, last, fc, dropout: 0.2 })
}

impl ModuleT for MobileNetV2 {
    /// torchvision's `forward`: features, global average pooling, flatten, classifier.
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let mut x = self.stem.forward_t(xs, train);
        for b in &self.blocks {
            x = b.forward_t(&x, train);
        }
        pooled_head(&x, &self.last, (self.dropout, &self.fc), train)
    }
}
