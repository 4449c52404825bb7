//! torchvision's ConvNeXt (Tiny, Small, Base, Large), with its parameter names and order: a
//! 4x4 stride-4 stem with a channels-first LayerNorm, four stages of `CNBlock`s (a 7x7
//! depthwise convolution, LayerNorm over the channels, a 4x wider linear layer, GELU, a linear
//! layer back, a learned per-channel scale, stochastic depth and the residual sum) with a
//! LayerNorm and a 2x2 stride-2 convolution between stages, and a head of LayerNorm and one
//! linear layer.
use tch::nn::{self, ModuleT};
use tch::Tensor;

use super::layers::stochastic_depth;
use crate::{Error, Result};

/// LayerNorm's epsilon in ConvNeXt.
const EPS: f64 = 1e-6;

/// The stages' widths and depths, and the largest stochastic-depth probability, of each name.
fn config(name: &str) -> Option<([i64; 4], [usize; 4], f64)> {
    Some(match name {
        "convnext_tiny" => ([96, 192, 384, 768], [3, 3, 9, 3], 0.1),
        "convnext_small" => ([96, 192, 384, 768], [3, 3, 27, 3], 0.4),
        "convnext_base" => ([128, 256, 512, 1024], [3, 3, 27, 3], 0.5),
        "convnext_large" => ([192, 384, 768, 1536], [3, 3, 27, 3], 0.5),
        _ => return None,
    })
}

/// torchvision's initialisation of ConvNeXt's weights: `trunc_normal_(std=0.02)`, whose
/// bounds (-2, 2) lie 100 standard deviations out, so a normal draw (the same distribution
/// but for those tails, not the same draws).
fn init() -> nn::Init {
    nn::Init::Randn { mean: 0.0, stdev: 0.02 }
}

/// A LayerNorm's weight (1) and bias (0) under `p`.
fn norm(p: &nn::Path, c: i64) -> (Tensor, Tensor) {
    (p.var("weight", &[c], nn::Init::Const(1.0)), p.var("bias", &[c], nn::Init::Const(0.0)))
}

/// LayerNorm over the last dimension (the channels of an NHWC tensor).
fn layer_norm(xs: &Tensor, (w, b): &(Tensor, Tensor)) -> Tensor {
    xs.layer_norm([w.size()[0]], Some(w), Some(b), EPS, true)
}

/// torchvision's `LayerNorm2d`: LayerNorm over the channels of an NCHW tensor.
fn layer_norm_2d(xs: &Tensor, norm: &(Tensor, Tensor)) -> Tensor {
    layer_norm(&xs.permute([0, 2, 3, 1]), norm).permute([0, 3, 1, 2])
}

/// A convolution with bias (weight first), ConvNeXt's initialisation.
fn conv(p: &nn::Path, (c_in, c_out, k, stride, groups): (i64, i64, i64, i64, i64)) -> nn::Conv2D {
    let padding = if stride == 1 { (k - 1) / 2 } else { 0 };
    let ws_init = init();
    let config =
        nn::ConvConfig { stride, padding, groups, bias: false, ws_init, ..Default::default() };
    let mut c = nn::conv2d(p, c_in, c_out, k, config);
    c.bs = Some(p.var("bias", &[c_out], nn::Init::Const(0.0)));
    c
}

/// A linear layer (weight first), ConvNeXt's initialisation.
fn linear(p: &nn::Path, c_in: i64, c_out: i64) -> nn::Linear {
    let ws = p.var("weight", &[c_out, c_in], init());
    nn::Linear { ws, bs: Some(p.var("bias", &[c_out], nn::Init::Const(0.0))) }
}

/// torchvision's `CNBlock`.
#[derive(Debug)]
struct CnBlock {
    layer_scale: Tensor,
    dw: nn::Conv2D,
    norm: (Tensor, Tensor),
    fc1: nn::Linear,
    fc2: nn::Linear,
    /// The probability of dropping the block's branch for a sample (training only).
    drop: f64,
}

impl CnBlock {
    fn new(p: &nn::Path, dim: i64, drop: f64) -> CnBlock {
        // torch lists a module's own parameters before its children's: `layer_scale` first.
        let layer_scale = p.var("layer_scale", &[dim, 1, 1], nn::Init::Const(1e-6));
        let block = p / "block";
        let dw = conv(&(&block / 0), (dim, dim, 7, 1, dim));
        let norm = norm(&(&block / 2), dim);
        let (fc1, fc2) = (linear(&(&block / 3), dim, 4 * dim), linear(&(&block / 5), 4 * dim, dim));
        CnBlock { layer_scale, dw, norm, fc1, fc2, drop }
    }

    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let y = xs.apply(&self.dw).permute([0, 2, 3, 1]);
        let y = layer_norm(&y, &self.norm).apply(&self.fc1).gelu("none").apply(&self.fc2);
        let mut y = stochastic_depth(&self.layer_scale * y.permute([0, 3, 1, 2]), self.drop, train);
        let _ = y.g_add_(xs);
        y
    }
}

/// A stage's blocks and the downsampling after it (LayerNorm2d, 2x2 stride-2 convolution).
#[derive(Debug)]
struct Stage {
    blocks: Vec<CnBlock>,
    down: Option<((Tensor, Tensor), nn::Conv2D)>,
}

/// torchvision's `convnext_tiny` (or `_small`, `_base`, `_large`), built by [`convnext`].
#[derive(Debug)]
pub struct ConvNeXt {
    stem: (nn::Conv2D, (Tensor, Tensor)),
    stages: Vec<Stage>,
    head_norm: (Tensor, Tensor),
    head: nn::Linear,
}

/// torchvision's `convnext_tiny(num_classes=classes)` (`name` `"convnext_tiny"`, or
/// `"convnext_small"`, `"convnext_base"`, `"convnext_large"`) under `path`: its names
/// (`features.*`, `classifier.0`, `classifier.2`), parameter order, stochastic-depth
/// probabilities (rising linearly over the blocks to 0.1, 0.4, 0.5, 0.5) and initialisation
/// (normal weights with std 0.02, zero biases, LayerNorm weight 1, layer scale 1e-6; the same
/// distributions, not the same draws). Errors: another name.
///
/// ```
/// # fn main() -> trainbook::Result<()> {
/// use tch::nn::{ModuleT, VarStore};
/// use tch::{Device, Kind, Tensor};
/// use trainbook::models::convnext;
/// let vs = VarStore::new(Device::Cpu);
/// let model = convnext(&vs.root(), "convnext_tiny", 10)?;
/// let images = Tensor::zeros([1, 3, 64, 64], (Kind::Float, Device::Cpu));
/// assert_eq!(model.forward_t(&images, false).size(), [1, 10]);
/// # Ok(()) }
/// ```
pub fn convnext(path: &nn::Path, name: &str, classes: i64) -> Result<ConvNeXt> {
    let (widths, depths, max_drop) = config(name).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "model {name:?}: the ConvNeXts are convnext_tiny, convnext_small, convnext_base and \
             convnext_large"
        ))
    })?;
    let features = path / "features";
    let stem_conv = conv(&(&features / 0 / 0), (3, widths[0], 4, 4, 1));
    let stem = (stem_conv, norm(&(&features / 0 / 1), widths[0]));
    let total: usize = depths.iter().sum();
    let (mut id, mut index) = (0usize, 1usize);
    let mut stages = Vec::new();
    for (s, (&dim, &depth)) in widths.iter().zip(&depths).enumerate() {
        let p = &features / index;
        let blocks = (0..depth)
            .map(|b| {
                let drop = max_drop * id as f64 / (total as f64 - 1.0);
                id += 1;
                CnBlock::new(&(&p / b), dim, drop)
            })
            .collect();
        index += 1;
        let down = (s + 1 < widths.len()).then(|| {
            let p = &features / index;
            index += 1;
            (norm(&(&p / 0), dim), conv(&(&p / 1), (dim, widths[s + 1], 2, 2, 1)))
        });
        stages.push(Stage { blocks, down });
    }
    let classifier = path / "classifier";
    let last = widths[3];
    let head_norm = norm(&(&classifier / 0), last);
    let head = linear(&(&classifier / 2), last, classes);
    Ok(ConvNeXt { stem, stages, head_norm, head })
}

impl ModuleT for ConvNeXt {
    /// torchvision's `forward`: features, global average pooling, LayerNorm2d, flatten, linear.
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let mut x = layer_norm_2d(&xs.apply(&self.stem.0), &self.stem.1);
        for stage in &self.stages {
            for b in &stage.blocks {
                x = b.forward_t(&x, train);
            }
            if let Some((norm, conv)) = &stage.down {
                x = layer_norm_2d(&x, norm).apply(conv);
            }
        }
        let x = x.adaptive_avg_pool2d([1, 1]);
        layer_norm_2d(&x, &self.head_norm).flatten(1, -1).apply(&self.head)
    }
}
