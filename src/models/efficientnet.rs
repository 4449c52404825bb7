//! torchvision's EfficientNet B0 to B7 and EfficientNetV2 S, M and L, with its parameter names
//! and order: a stem convolution, stages of MBConv blocks (a 1x1 expansion, a depthwise
//! convolution, both with SiLU, a squeeze-and-excitation with a sigmoid gate, a linear 1x1
//! projection; stochastic depth on the shortcut, its probability rising block by block to 0.2),
//! a last 1x1 convolution, and a classifier of dropout and one linear layer. Each B size scales
//! the widths and depths of B0 by its multipliers, as torchvision's `_efficientnet_conf` does;
//! the V2 models start with stages of FusedMBConv blocks (one full 3x3 convolution in place of
//! the expansion and the depthwise convolution, no squeeze-and-excitation).
use tch::nn::{self, ModuleT};
use tch::Tensor;

use super::batch_norm::SyncSlot;
use super::conv_norm_act::{conv1x1_bias, pooled_head, Act, ConvBn, Gate, SqueezeExcitation};
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

/// The names of the V2 models [`efficientnet`] builds.
pub const EFFICIENTNET_V2_NAMES: [&str; 3] =
    ["efficientnet_v2_s", "efficientnet_v2_m", "efficientnet_v2_l"];

/// One stage of a V2 model (torchvision's `FusedMBConvConfig` or `MBConvConfig`): fused,
/// expansion, kernel, stride, input channels, output channels, blocks.
type V2Stage = (bool, i64, i64, i64, i64, i64, i64);

/// Each V2 model's stages (torchvision's `_efficientnet_conf`) and classifier dropout.
fn v2(name: &str) -> Option<(Vec<V2Stage>, f64)> {
    let (f, m) = (true, false);
    Some(match name {
        "efficientnet_v2_s" => (
            vec![
                (f, 1, 3, 1, 24, 24, 2),
                (f, 4, 3, 2, 24, 48, 4),
                (f, 4, 3, 2, 48, 64, 4),
                (m, 4, 3, 2, 64, 128, 6),
                (m, 6, 3, 1, 128, 160, 9),
                (m, 6, 3, 2, 160, 256, 15),
            ],
            0.2,
        ),
        "efficientnet_v2_m" => (
            vec![
                (f, 1, 3, 1, 24, 24, 3),
                (f, 4, 3, 2, 24, 48, 5),
                (f, 4, 3, 2, 48, 80, 5),
                (m, 4, 3, 2, 80, 160, 7),
                (m, 6, 3, 1, 160, 176, 14),
                (m, 6, 3, 2, 176, 304, 18),
                (m, 6, 3, 1, 304, 512, 5),
            ],
            0.3,
        ),
        "efficientnet_v2_l" => (
            vec![
                (f, 1, 3, 1, 32, 32, 4),
                (f, 4, 3, 2, 32, 64, 7),
                (f, 4, 3, 2, 64, 96, 7),
                (m, 4, 3, 2, 96, 192, 10),
                (m, 6, 3, 1, 192, 224, 19),
                (m, 6, 3, 2, 224, 384, 25),
                (m, 6, 3, 1, 384, 640, 7),
            ],
            0.4,
        ),
        _ => return None,
    })
}

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
            act: Act::Silu,
            gate: Gate::Sigmoid,
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
        let y = self.project.forward_t(&self.se.forward(&y), train);
        if self.residual {
            let mut y = stochastic_depth(y, self.drop, train);
            let _ = y.g_add_(xs);
            y
        } else {
            y
        }
    }
}

/// torchvision's `FusedMBConv` (`block.0`, and `block.1` with an expansion): a full
/// convolution with SiLU (expanding, or straight to the output), then a linear 1x1 projection
/// when it expanded.
#[derive(Debug)]
struct FusedMbConv {
    fused: ConvBn,
    project: Option<ConvBn>,
    residual: bool,
    drop: f64,
}

impl FusedMbConv {
    fn new(p: &nn::Path, shape: BlockShape, drop: f64, sync: &SyncSlot, bn: (f64, f64)) -> Self {
        let (c_in, c_out, t, k, stride) = shape;
        let block = p / "block";
        let expanded = make_divisible((c_in * t) as f64, 8);
        let (fused, project) = if expanded != c_in {
            let fused =
                ConvBn::new(&(&block / 0), (c_in, expanded, k, stride, 1), Act::Silu, sync, bn);
            let project =
                ConvBn::new(&(&block / 1), (expanded, c_out, 1, 1, 1), Act::None, sync, bn);
            (fused, Some(project))
        } else {
            (ConvBn::new(&(&block / 0), (c_in, c_out, k, stride, 1), Act::Silu, sync, bn), None)
        };
        FusedMbConv { fused, project, residual: stride == 1 && c_in == c_out, drop }
    }

    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let mut y = self.fused.forward_t(xs, train);
        if let Some(p) = &self.project {
            y = p.forward_t(&y, train);
        }
        if self.residual {
            let mut y = stochastic_depth(y, self.drop, train);
            let _ = y.g_add_(xs);
            y
        } else {
            y
        }
    }
}

/// A block of either kind.
#[derive(Debug)]
enum Block {
    Mb(Box<MbConv>),
    Fused(Box<FusedMbConv>),
}

impl Block {
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        match self {
            Block::Mb(b) => b.forward_t(xs, train),
            Block::Fused(b) => b.forward_t(xs, train),
        }
    }
}

/// torchvision's EfficientNet B0 ... B7 and V2 S, M, L, built by [`efficientnet`].
#[derive(Debug)]
pub struct EfficientNet {
    stem: ConvBn,
    blocks: Vec<Block>,
    last: ConvBn,
    fc: nn::Linear,
    dropout: f64,
}

/// torchvision's `efficientnet_b0(num_classes=classes)` ... `efficientnet_b7` and
/// `efficientnet_v2_s` ... `efficientnet_v2_l` under `path` (`name` one of
/// [`EFFICIENTNET_NAMES`] or [`EFFICIENTNET_V2_NAMES`]): its names
/// (`features.<stage>.<block>.block.*`, `classifier.1`), parameter order, widths, depths,
/// BatchNorm settings (V2: eps 1e-3), dropout and stochastic depth; initialised as
/// torchvision's (Kaiming-normal convolutions with fan-out and bias 0, BatchNorm weight 1 and
/// bias 0, the linear weight uniform within `1/sqrt(classes)` and bias 0: the same
/// distributions, not the same draws). Errors: another name.
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
    // Every stage as (fused, expansion, kernel, stride, input, output, blocks), the last
    // layer's width, the classifier's dropout and the BatchNorm's (eps, momentum).
    let (stages, last_width, dropout, bn) = if let Some((width, depth, dropout, bn)) = size(name) {
        let channels = |c: i64| make_divisible(c as f64 * width, 8);
        let stages: Vec<V2Stage> = B0
            .iter()
            .map(|&(t, k, s, c_in, c_out, n)| {
                let n = (n as f64 * depth).ceil() as i64;
                (false, t, k, s, channels(c_in), channels(c_out), n)
            })
            .collect();
        let last = 4 * stages[stages.len() - 1].5;
        (stages, last, dropout, bn)
    } else if let Some((stages, dropout)) = v2(name) {
        (stages, 1280, dropout, (1e-3, 0.1))
    } else {
        return Err(Error::InvalidArgument(format!(
            "model {name:?}: the EfficientNets are {}, {}",
            EFFICIENTNET_NAMES.join(", "),
            EFFICIENTNET_V2_NAMES.join(", ")
        )));
    };
    let total: i64 = stages.iter().map(|st| st.6).sum();
    let sync = SyncSlot::default();
    let features = path / "features";
    let first = stages[0].4;
    let stem = ConvBn::new(&(&features / 0), (3, first, 3, 2, 1), Act::Silu, &sync, bn);
    let mut blocks = Vec::new();
    for (s, &(fused, t, k, stride, c_in, c_out, n)) in stages.iter().enumerate() {
        let stage = &features / (s + 1);
        for j in 0..n {
            let (c_in, stride) = if j == 0 { (c_in, stride) } else { (c_out, 1) };
            let drop = 0.2 * blocks.len() as f64 / total as f64;
            let (p, shape) = (&stage / j, (c_in, c_out, t, k, stride));
            blocks.push(if fused {
                Block::Fused(Box::new(FusedMbConv::new(&p, shape, drop, &sync, bn)))
            } else {
                Block::Mb(Box::new(MbConv::new(&p, shape, drop, &sync, bn)))
            });
        }
    }
    let c_last = stages[stages.len() - 1].5;
    let last_path = &features / (stages.len() + 1);
    let last = ConvBn::new(&last_path, (c_last, last_width, 1, 1, 1), Act::Silu, &sync, bn);
    let fc = linear(&(path / "classifier" / 1), last_width, classes);
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
