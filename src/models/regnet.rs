//! torchvision's RegNets (Radosavovic et al., "Designing Network Design Spaces"), X and Y, every
//! size torchvision builds: a 3x3 stem, four stages of residual bottleneck blocks (a 1x1
//! convolution, a grouped 3x3 convolution, for the Y models a squeeze-and-excitation, a linear
//! 1x1 convolution; a projection on the shortcut where the shape changes, ReLU after the sum),
//! global average pooling and one linear layer. Each stage's width, depth and group width come
//! from the model's four numbers (depth, w_0, w_a, w_m) by torchvision's `BlockParams`
//! quantisation, computed with the same float32 tensor operations.
use tch::nn::{self, ModuleT};
use tch::{Device, Kind, Tensor};

use super::batch_norm::SyncSlot;
use super::conv_norm_act::{conv, Act, ConvBn, Gate, SqueezeExcitation};
use super::layers::{conv_default_bias, linear};
use crate::{Error, Result};

/// PyTorch's BatchNorm defaults, as torchvision's RegNets use them.
const BN: (f64, f64) = (1e-5, 0.1);

/// The names [`regnet`] builds.
pub const REGNET_NAMES: [&str; 15] = [
    "regnet_y_400mf",
    "regnet_y_800mf",
    "regnet_y_1_6gf",
    "regnet_y_3_2gf",
    "regnet_y_8gf",
    "regnet_y_16gf",
    "regnet_y_32gf",
    "regnet_y_128gf",
    "regnet_x_400mf",
    "regnet_x_800mf",
    "regnet_x_1_6gf",
    "regnet_x_3_2gf",
    "regnet_x_8gf",
    "regnet_x_16gf",
    "regnet_x_32gf",
];

/// A model's settings as torchvision's builders pass them to `BlockParams.from_init_params`:
/// depth, w_0, w_a, w_m, group width, and the Y models' squeeze-and-excitation ratio.
fn settings(name: &str) -> Option<(i64, i64, f64, f64, i64, Option<f64>)> {
    let se = Some(0.25);
    Some(match name {
        "regnet_y_400mf" => (16, 48, 27.89, 2.09, 8, se),
        "regnet_y_800mf" => (14, 56, 38.84, 2.4, 16, se),
        "regnet_y_1_6gf" => (27, 48, 20.71, 2.65, 24, se),
        "regnet_y_3_2gf" => (21, 80, 42.63, 2.66, 24, se),
        "regnet_y_8gf" => (17, 192, 76.82, 2.19, 56, se),
        "regnet_y_16gf" => (18, 200, 106.23, 2.48, 112, se),
        "regnet_y_32gf" => (20, 232, 115.89, 2.53, 232, se),
        "regnet_y_128gf" => (27, 456, 160.83, 2.52, 264, se),
        "regnet_x_400mf" => (22, 24, 24.48, 2.54, 16, None),
        "regnet_x_800mf" => (16, 56, 35.73, 2.28, 16, None),
        "regnet_x_1_6gf" => (18, 80, 34.01, 2.25, 24, None),
        "regnet_x_3_2gf" => (25, 88, 26.31, 2.25, 48, None),
        "regnet_x_8gf" => (23, 80, 49.56, 2.88, 120, None),
        "regnet_x_16gf" => (22, 216, 55.59, 2.1, 128, None),
        "regnet_x_32gf" => (23, 320, 69.86, 2.0, 168, None),
        _ => return None,
    })
}

/// One stage: its output width, depth (blocks) and group width.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Stage {
    width: i64,
    depth: i64,
    group_width: i64,
}

/// torchvision's `BlockParams.from_init_params` (bottleneck multiplier 1, stride 2 per stage):
/// the block widths `w_0 * w_m^round(log((i * w_a + w_0) / w_0) / log(w_m))` quantised to
/// multiples of 8, in float32 as torch computes them; a stage wherever the width changes; then
/// each stage's group width capped at its width and the width made divisible by it.
fn stages(depth: i64, w_0: i64, w_a: f64, w_m: f64, group_width: i64) -> Vec<Stage> {
    let widths_cont = Tensor::arange(depth, (Kind::Float, Device::Cpu)) * w_a + w_0;
    let capacity = (widths_cont / w_0 as f64).log() / w_m.ln();
    let capacity = capacity.round();
    let block = (Tensor::pow_scalar(w_m, &capacity) * w_0).divide_scalar(8).round() * 8;
    let block: Vec<i32> = Vec::<i32>::try_from(block.to_kind(Kind::Int)).unwrap_or_default();
    let mut stages: Vec<Stage> = Vec::new();
    for w in block {
        match stages.last_mut() {
            Some(s) if s.width == w as i64 => s.depth += 1,
            _ => stages.push(Stage { width: w as i64, depth: 1, group_width }),
        }
    }
    for s in &mut stages {
        // _adjust_widths_groups_compatibilty with a bottleneck multiplier of 1.
        s.group_width = s.group_width.min(s.width);
        s.width = make_divisible_by(s.width, s.group_width);
    }
    stages
}

/// torchvision's `_make_divisible(v, divisor)` (min_value = divisor): `v` rounded to the
/// nearest multiple of `divisor`, at least `divisor`, and not below 90% of `v`.
fn make_divisible_by(v: i64, divisor: i64) -> i64 {
    let rounded = ((v as f64 + divisor as f64 / 2.0) as i64 / divisor * divisor).max(divisor);
    if (rounded as f64) < 0.9 * v as f64 {
        rounded + divisor
    } else {
        rounded
    }
}

/// torchvision's `ResBottleneckBlock` (`proj`, `f.a`, `f.b`, `f.se`, `f.c`).
#[derive(Debug)]
struct Block {
    proj: Option<ConvBn>,
    a: ConvBn,
    b: ConvBn,
    se: Option<SqueezeExcitation>,
    c: ConvBn,
}

impl Block {
    fn new(
        p: &nn::Path,
        (w_in, w_out, stride, group_width): (i64, i64, i64, i64),
        se_ratio: Option<f64>,
        sync: &SyncSlot,
    ) -> Block {
        let proj = (w_in != w_out || stride != 1)
            .then(|| ConvBn::new(&(p / "proj"), (w_in, w_out, 1, stride, 1), Act::None, sync, BN));
        let f = p / "f";
        let groups = w_out / group_width;
        let a = ConvBn::new(&(&f / "a"), (w_in, w_out, 1, 1, 1), Act::Relu, sync, BN);
        let b = ConvBn::new(&(&f / "b"), (w_out, w_out, 3, stride, groups), Act::Relu, sync, BN);
        let se = se_ratio.map(|r| {
            let squeeze = (r * w_in as f64).round() as i64;
            let se = &f / "se";
            SqueezeExcitation {
                fc1: conv_default_bias(conv(&se / "fc1", (w_out, squeeze, 1, 1, 1)), &se / "fc1"),
                fc2: conv_default_bias(conv(&se / "fc2", (squeeze, w_out, 1, 1, 1)), &se / "fc2"),
                act: Act::Relu,
                gate: Gate::Sigmoid,
            }
        });
        let c = ConvBn::new(&(&f / "c"), (w_out, w_out, 1, 1, 1), Act::None, sync, BN);
        Block { proj, a, b, se, c }
    }

    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let shortcut = match &self.proj {
            Some(p) => p.forward_t(xs, train),
            None => xs.shallow_clone(),
        };
        let mut y = self.b.forward_t(&self.a.forward_t(xs, train), train);
        if let Some(se) = &self.se {
            y = se.forward(&y);
        }
        let y = self.c.forward_t(&y, train);
        (shortcut + y).relu()
    }
}

/// torchvision's RegNet X or Y, built by [`regnet`].
#[derive(Debug)]
pub struct RegNet {
    stem: ConvBn,
    blocks: Vec<Block>,
    fc: nn::Linear,
}

/// torchvision's `regnet_y_400mf(num_classes=classes)` ... `regnet_x_32gf` under `path`
/// (`name` one of [`REGNET_NAMES`]): its names (`stem.*`,
/// `trunk_output.block<s>.block<s>-<i>.{proj,f.a,f.b,f.se,f.c}.*`, `fc`), parameter order and
/// stage widths; initialised as torchvision's (convolution weights normal with std
/// `sqrt(2 / fan_out)`, the squeeze-and-excitation biases PyTorch's default, BatchNorm weight 1
/// and bias 0, the linear weight normal with std 0.01 and bias 0: the same distributions, not
/// the same draws). Errors: another name.
///
/// ```
/// # fn main() -> trainbook::Result<()> {
/// use tch::nn::{ModuleT, VarStore};
/// use tch::{Device, Kind, Tensor};
/// use trainbook::models::regnet;
/// let vs = VarStore::new(Device::Cpu);
/// let model = regnet(&vs.root(), "regnet_y_400mf", 10)?;
/// let images = Tensor::zeros([2, 3, 64, 64], (Kind::Float, Device::Cpu));
/// assert_eq!(model.forward_t(&images, false).size(), [2, 10]);
/// # Ok(()) }
/// ```
pub fn regnet(path: &nn::Path, name: &str, classes: i64) -> Result<RegNet> {
    let (depth, w_0, w_a, w_m, group_width, se) = settings(name).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "model {name:?}: the RegNets are {}",
            REGNET_NAMES.join(", ")
        ))
    })?;
    let sync = SyncSlot::default();
    let stem = ConvBn::new(&(path / "stem"), (3, 32, 3, 2, 1), Act::Relu, &sync, BN);
    let trunk = path / "trunk_output";
    let mut blocks = Vec::new();
    let mut w_in = 32;
    for (s, stage) in stages(depth, w_0, w_a, w_m, group_width).iter().enumerate() {
        let stage_path = &trunk / format!("block{}", s + 1);
        for i in 0..stage.depth {
            let p = &stage_path / format!("block{}-{i}", s + 1);
            let stride = if i == 0 { 2 } else { 1 };
            blocks.push(Block::new(&p, (w_in, stage.width, stride, stage.group_width), se, &sync));
            w_in = stage.width;
        }
    }
    let fc = linear(&(path / "fc"), w_in, classes);
    tch::no_grad(|| {
        let _ = fc.ws.shallow_clone().normal_(0.0, 0.01);
        let _ = fc.bs.as_ref().map(|b| b.shallow_clone().zero_());
    });
    Ok(RegNet { stem, blocks, fc })
}

impl ModuleT for RegNet {
    /// torchvision's `forward`: stem, trunk, global average pooling, flatten, `fc`.
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let mut x = self.stem.forward_t(xs, train);
        for b in &self.blocks {
            x = b.forward_t(&x, train);
        }
        x.adaptive_avg_pool2d([1, 1]).flatten(1, -1).apply(&self.fc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stage_widths_are_torchvisions() {
        // torchvision 0.28's BlockParams.from_init_params for regnet_y_400mf and regnet_x_32gf
        // (widths, depths, group widths), printed from the venv.
        let y = stages(16, 48, 27.89, 2.09, 8);
        let got: Vec<(i64, i64, i64)> =
            y.iter().map(|s| (s.width, s.depth, s.group_width)).collect();
        assert_eq!(got, [(48, 1, 8), (104, 3, 8), (208, 6, 8), (440, 6, 8)]);
        let x = stages(23, 320, 69.86, 2.0, 168);
        let got: Vec<(i64, i64, i64)> =
            x.iter().map(|s| (s.width, s.depth, s.group_width)).collect();
        assert_eq!(got, [(336, 2, 168), (672, 7, 168), (1344, 13, 168), (2520, 1, 168)]);
        assert_eq!(make_divisible_by(100, 8), 104);
        assert_eq!(make_divisible_by(3, 8), 8);
    }
}
