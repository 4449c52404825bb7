//! torchvision's MNASNet (the B1 variant, depth multipliers 0.5, 0.75, 1.0 and 1.3), with its
//! parameter names and order: a stem of a 3x3 convolution, a depthwise 3x3 and a 1x1
//! projection, six stacks of inverted residual blocks (1x1 expansion, depthwise 3x3 or 5x5,
//! linear 1x1 projection; a shortcut where the shape allows), a last 1x1 convolution to 1280
//! channels, the mean over the picture, dropout and one linear layer. Its BatchNorms use
//! momentum `1 - 0.9997`, as torchvision's.
use tch::nn::{self, ModuleT};
use tch::Tensor;

use super::batch_norm::SyncSlot;
use super::conv_norm_act::{conv, SeqConvBn as ConvNorm};
use crate::{Error, Result};

/// torchvision's BatchNorm settings for MNASNet: eps 1e-5, momentum `1 - 0.9997`.
const BN: (f64, f64) = (1e-5, 1.0 - 0.9997);

/// The names [`mnasnet`] builds.
pub const MNASNET_NAMES: [&str; 4] = ["mnasnet0_5", "mnasnet0_75", "mnasnet1_0", "mnasnet1_3"];

/// Each name's depth multiplier.
fn alpha(name: &str) -> Option<f64> {
    Some(match name {
        "mnasnet0_5" => 0.5,
        "mnasnet0_75" => 0.75,
        "mnasnet1_0" => 1.0,
        "mnasnet1_3" => 1.3,
        _ => return None,
    })
}

/// torchvision's `_round_to_multiple_of(val, divisor)` (round-up bias 0.9).
fn round_to_multiple_of(val: f64, divisor: i64) -> i64 {
    let rounded = ((val + divisor as f64 / 2.0) as i64 / divisor * divisor).max(divisor);
    if rounded as f64 >= 0.9 * val {
        rounded
    } else {
        rounded + divisor
    }
}

/// A convolution (Kaiming normal with fan-out, no bias) at `seq / i` and its BatchNorm at
/// `seq / (i + 1)`.
fn conv_bn(
    seq: &nn::Path,
    i: usize,
    shape: (i64, i64, i64, i64, i64),
    sync: &SyncSlot,
) -> ConvNorm {
    ConvNorm::new(seq, i, conv(seq / i, shape), sync, BN)
}

/// torchvision's MNASNet `_InvertedResidual` (`layers.0` ... `layers.7`).
#[derive(Debug)]
struct InvertedResidual {
    expand: ConvNorm,
    depthwise: ConvNorm,
    project: ConvNorm,
    residual: bool,
}

impl InvertedResidual {
    fn new(
        p: &nn::Path,
        (c_in, c_out, k, stride, t): (i64, i64, i64, i64, i64),
        sync: &SyncSlot,
    ) -> Self {
        let mid = c_in * t;
        let seq = p / "layers";
        InvertedResidual {
            expand: conv_bn(&seq, 0, (c_in, mid, 1, 1, 1), sync),
            depthwise: conv_bn(&seq, 3, (mid, mid, k, stride, mid), sync),
            project: conv_bn(&seq, 6, (mid, c_out, 1, 1, 1), sync),
            residual: c_in == c_out && stride == 1,
        }
    }

    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let y = self.expand.forward_t(xs, train).relu();
        let y = self.depthwise.forward_t(&y, train).relu();
        let y = self.project.forward_t(&y, train);
        if self.residual {
            y + xs
        } else {
            y
        }
    }
}

/// torchvision's MNASNet, built by [`mnasnet`].
#[derive(Debug)]
pub struct MnasNet {
    stem: [ConvNorm; 3],
    blocks: Vec<InvertedResidual>,
    last: ConvNorm,
    fc: nn::Linear,
    dropout: f64,
}

/// torchvision's `mnasnet1_0(num_classes=classes)` (and `mnasnet0_5`, `mnasnet0_75`,
/// `mnasnet1_3`) under `path` (`name` one of [`MNASNET_NAMES`]): its names (`layers.<i>.*`,
/// the stacks' `layers.<i>.<j>.layers.*`, `classifier.1`), parameter order, widths and
/// initialisation (Kaiming-normal convolutions with fan-out, BatchNorm weight 1 and bias 0,
/// the linear weight Kaiming-uniform with fan-out and a gain of 1, bias 0: the same
/// distributions, not the same draws). Errors: another name.
///
/// ```
/// # fn main() -> trainbook::Result<()> {
/// use tch::nn::{ModuleT, VarStore};
/// use tch::{Device, Kind, Tensor};
/// use trainbook::models::mnasnet;
/// let vs = VarStore::new(Device::Cpu);
/// let model = mnasnet(&vs.root(), "mnasnet0_5", 10)?;
/// let images = Tensor::zeros([2, 3, 64, 64], (Kind::Float, Device::Cpu));
/// assert_eq!(model.forward_t(&images, false).size(), [2, 10]);
/// # Ok(()) }
/// ```
pub fn mnasnet(path: &nn::Path, name: &str, classes: i64) -> Result<MnasNet> {
    let alpha = alpha(name).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "model {name:?}: the MNASNets are {}",
            MNASNET_NAMES.join(", ")
        ))
    })?;
    let d: Vec<i64> = [32, 16, 24, 40, 80, 96, 192, 320]
        .iter()
        .map(|&c| round_to_multiple_of(c as f64 * alpha, 8))
        .collect();
    let sync = SyncSlot::default();
    let layers = path / "layers";
    let stem = [
        conv_bn(&layers, 0, (3, d[0], 3, 2, 1), &sync),
        conv_bn(&layers, 3, (d[0], d[0], 3, 1, d[0]), &sync),
        conv_bn(&layers, 6, (d[0], d[1], 1, 1, 1), &sync),
    ];
    // torchvision's six `_stack`s: kernel, stride, expansion, repeats.
    let stacks =
        [(3, 2, 3, 3), (5, 2, 3, 3), (5, 2, 6, 3), (3, 1, 6, 2), (5, 2, 6, 4), (3, 1, 6, 1)];
    let mut blocks = Vec::new();
    for (s, &(k, stride, t, repeats)) in stacks.iter().enumerate() {
        let stack = &layers / (8 + s);
        let (c_in, c_out) = (d[s + 1], d[s + 2]);
        for j in 0..repeats {
            let (c_in, stride) = if j == 0 { (c_in, stride) } else { (c_out, 1) };
            blocks.push(InvertedResidual::new(&(&stack / j), (c_in, c_out, k, stride, t), &sync));
        }
    }
    let last = conv_bn(&layers, 14, (d[7], 1280, 1, 1, 1), &sync);
    let fc_path = path / "classifier" / 1;
    let bound = 3f64.sqrt() / (classes as f64).sqrt();
    let ws = fc_path.var("weight", &[classes, 1280], nn::Init::Uniform { lo: -bound, up: bound });
    let fc = nn::Linear { ws, bs: Some(fc_path.var("bias", &[classes], nn::Init::Const(0.0))) };
    Ok(MnasNet { stem, blocks, last, fc, dropout: 0.2 })
}

impl ModuleT for MnasNet {
    /// torchvision's `forward`: the layers, the mean over the picture, the classifier.
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let [a, b, c] = &self.stem;
        let x = a.forward_t(xs, train).relu();
        let x = b.forward_t(&x, train).relu();
        let mut x = c.forward_t(&x, train);
        for block in &self.blocks {
            x = block.forward_t(&x, train);
        }
        let x = self.last.forward_t(&x, train).relu().mean_dim(
            &[2i64, 3][..],
            false,
            None::<tch::Kind>,
        );
        x.dropout(self.dropout, train).apply(&self.fc)
    }
}
