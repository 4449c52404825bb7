//! torchvision's EfficientNet B0 to B7, with its parameter names and order: a stem
//! convolution, seven stages of MBConv blocks (a 1x1 expansion, a depthwise convolution, both
//! with SiLU, a squeeze-and-excitation with a sigmoid gate, a linear 1x1 projection; stochastic
//! depth on the shortcut, its probability rising block by block to 0.2), a last 1x1
//! convolution, and a classifier of dropout and one linear layer. Each size scales the widths
//! and depths of B0 by its multipliers, as torchvision's `_efficientnet_conf` does.
use tch::nn::{self, ModuleT};
use tch::Tensor;

use super::batch_norm::SyncSlot;
use super::conv_norm_act::{conv1x1_bias, pooled_head, Act, ConvBn};
use super::layers::{linear, make_divisible, stochastic_depth};
use crate::{Error, Result};

/// B0's stages (torchvision's `bneck_conf`): expansion, kernel, stride, input channels, output
/// channels, blocks.
const B0: [(i64, i64, i64, i64, i64, i64); 7] = [
    (1, 3, 1, 32, 16, 1),
    (6, 3, 2, 16, 24, 2),
    (6, 5, 2, 24, 40, 2),
    (6, 3, 2, 40, 80, 3),
    (6, 5, 1, 80, 112, 3),
    (6, 5, 2, 112, 192, 4),
    (6, 3, 1, 192, 320, 1),
];

/// The names [`efficientnet`] builds.
pub const EFFICIENTNET_NAMES: [&str; 8] = [
    "efficientnet_b0",
    "efficientnet_b1",
    "efficientnet_b2",
    "efficientnet_b3",
    "efficientnet_b4",
    "efficientnet_b5",
    "efficientnet_b6",
    "efficientnet_b7",
];

/// Each size's width and depth multipliers, classifier dropout and BatchNorm (eps, momentum).
fn size(name: &str) -> Option<(f64, f64, f64, (f64, f64))> {
    let (default_bn, tf_bn) = ((1e-5, 0.1), (0.001, 0.01));
    Some(match name {
        "efficientnet_b0" => (1.0, 1.0, 0.2, default_bn),
        "efficientnet_b1" => (1.0, 1.1, 0.2, default_bn),
        "efficientnet_b2" => (1.1, 1.2, 0.3, default_bn),
        "efficientnet_b3" => (1.2, 1.4, 0.3, default_bn),
        "efficientnet_b4" => (1.4, 1.8, 0.4, default_bn),
        "efficientnet_b5" => (1.6, 2.2, 0.4, tf_bn),
        "efficientnet_b6" => (1.8, 2.6, 0.5, tf_bn),
        "efficientnet_b7" => (2.0, 3.1, 0.5, tf_bn),
        _ => return None,
    })
}

/// torchvision's `SqueezeExcitation` with SiLU and a sigmoid gate.
#[derive(Debug)]
struct SqueezeExcitation {
    fc1: nn::Conv2D,
    fc2: nn::Conv2D,
}

/// torchvision's `MBConv` (`block.0`, `block.1`, ...).
#[derive(Debug)]
struct MbConv {
    expand: Option<ConvBn>,
    depthwise: ConvBn,
    se: SqueezeExcitation,
    project: ConvBn,
    residual: bool,
    drop: f64,
}

/// One block's shape: input and output channels, expansion, kernel, stride.
type BlockShape = (i64, i64, i64, i64, i64);

impl MbConv {
    fn new(p: &nn::Path, shape: BlockShape, drop: f64, sync: &SyncSlot, bn: (f64, f64)) -> Self {
        let (c_in, c_out, t, k, stride) = shape;
        let block = p / "block";
        let mut i = 0;
        let mut next = || {
            i += 1;
            &block / (i - 1)
        };
        let expanded = make_divisible((c_in * t) as f64, 8);
        let expand = (expanded != c_in)
            .then(|| ConvBn::new(&next(), (c_in, expanded, 1, 1, 1), Act::Silu, sync, bn));
        let depthwise =
            ConvBn::new(&next(), (expanded, expanded, k, stride, expanded), Act::Silu, sync, bn);
        let squeeze = (c_in / 4).max(1);
        let se_path = next();
        let se = SqueezeExcitation {
            fc1: conv1x1_bias(&se_path / "fc1", expanded, squeeze),
            fc2: conv1x1_bias(&se_path / "fc2", squeeze, expanded),
        };
        let project = ConvBn::new(&next(), (expanded, c_out, 1, 1, 1), Act::None, sync, bn);
        MbConv { expand, depthwise, se, project, residual: stride == 1 && c_in == c_out, drop }
    }

    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let y = match &self.expand {
            Some(e) => e.forward_t(xs, train),
            None => xs.shallow_clone(),
        };
        let y = self.depthwise.forward_t(&y, train);
        let scale = y.adaptive_avg_pool2d([1, 1]).apply(&self.se.fc1).silu().apply(&self.se.fc2);
        let y = self.project.forward_t(&(scale.sigmoid() * y), train);
        if self.residual {
            let mut y = stochastic_depth(y, self.drop, train);
            let _ = y.g_add_(xs);
            y
        } else {
            y
        }
    }
}

/// torchvision's EfficientNet B0 ... B7, built by [`efficientnet`].
#[derive(Debug)]
pub struct EfficientNet {
    stem: ConvBn,
    blocks: Vec<MbConv>,
    last: ConvBn,
    fc: nn::Linear,
    dropout: f64,
}

/// torchvision's `efficientnet_b0(num_classes=classes)` ... `efficientnet_b7` under `path`
/// (`name` one of [`EFFICIENTNET_NAMES`]): its names (`features.<stage>.<block>.block.*`,
/// `classifier.1`), parameter order, widths, depths, dropout and stochastic depth;
/// initialised as torchvision's (Kaiming-normal convolutions with fan-out and bias 0,
/// BatchNorm weight 1 and bias 0, the linear weight uniform within `1/sqrt(classes)` and bias
/// 0: the same distributions, not the same draws). Errors: another name.
///
/// ```
/// # fn main() -> trainbook::Result<()> {
/// use tch::nn::{ModuleT, VarStore};
/// use tch::{Device, Kind, Tensor};
/// use trainbook::models::efficientnet;
/// let vs = VarStore::new(Device::Cpu);
/// let model = efficientnet(&vs.root(), "efficientnet_b0", 10)?;
/// let images = Tensor::zeros([2, 3, 64, 64], (Kind::Float, Device::Cpu));
/// assert_eq!(model.forward_t(&images, false).size(), [2, 10]);
/// # Ok(()) }
/// ```
pub fn efficientnet(path: &nn::Path, name: &str, classes: i64) -> Result<EfficientNet> {
    let (width, depth, dropout, bn) = size(name).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "model {name:?}: the EfficientNets are {}",
            EFFICIENTNET_NAMES.join(", ")
        ))
    })?;
    let channels = |c: i64| make_divisible(c as f64 * width, 8);
    let stages: Vec<_> = B0
        .iter()
        .map(|&(t, k, s, c_in, c_out, n)| {
            (t, k, s, channels(c_in), channels(c_out), (n as f64 * depth).ceil() as i64)
        })
        .collect();
    let total: i64 = stages.iter().map(|st| st.5).sum();
    let sync = SyncSlot::default();
    let features = path / "features";
    let first = stages[0].3;
    let stem = ConvBn::new(&(&features / 0), (3, first, 3, 2, 1), Act::Silu, &sync, bn);
    let mut blocks = Vec::new();
    for (s, &(t, k, stride, c_in, c_out, n)) in stages.iter().enumerate() {
        let stage = &features / (s + 1);
        for j in 0..n {
            let (c_in, stride) = if j == 0 { (c_in, stride) } else { (c_out, 1) };
            let drop = 0.2 * blocks.len() as f64 / total as f64;
            let shape = (c_in, c_out, t, k, stride);
            blocks.push(MbConv::new(&(&stage / j), shape, drop, &sync, bn));
        }
    }
    let c_last = stages[stages.len() - 1].4;
    let last_path = &features / (stages.len() + 1);
    let last = ConvBn::new(&last_path, (c_last, 4 * c_last, 1, 1, 1), Act::Silu, &sync, bn);
    let fc = linear(&(path / "classifier" / 1), 4 * c_last, classes);
    tch::no_grad(|| {
        let range = 1.0 / (classes as f64).sqrt();
        let _ = fc.ws.shallow_clone().uniform_(-range, range);
        let _ = fc.bs.as_ref().map(|b| b.shallow_clone().zero_());
    });
    Ok(EfficientNet { stem, blocks, last, fc, dropout })
}

impl ModuleT for EfficientNet {
    /// torchvision's `forward`: features, global average pooling, flatten, classifier.
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let mut x = self.stem.forward_t(xs, train);
        for b in &self.blocks {
            x = b.forward_t(&x, train);
        }
        pooled_head(&x, &self.last, (self.dropout, &self.fc), train)
    }
}
