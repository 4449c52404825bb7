//! torchvision's ShuffleNet V2 (x0.5, x1.0, x1.5, x2.0), with its parameter names and order: a
//! 3x3 stem and a max pool, three stages of units that split the channels in two (a downsampling
//! unit runs both halves through branches; the others pass one half through and transform the
//! other: 1x1 convolution, depthwise 3x3, 1x1 convolution) and shuffle the channels of the two
//! halves, a last 1x1 convolution, global average pooling and one linear layer. torchvision
//! keeps PyTorch's default initialisation here, so the network drawn after a seed is the very
//! network torchvision draws after the same seed.
use tch::nn::{self, ConvConfig, ModuleT};
use tch::Tensor;

use super::batch_norm::SyncSlot;
use super::conv_norm_act::SeqConvBn as ConvNorm;
use super::layers::{conv2d, linear};
use crate::{Error, Result};

/// PyTorch's BatchNorm defaults.
const BN: (f64, f64) = (1e-5, 0.1);

/// The names [`shufflenet_v2`] builds.
pub const SHUFFLENET_V2_NAMES: [&str; 4] =
    ["shufflenet_v2_x0_5", "shufflenet_v2_x1_0", "shufflenet_v2_x1_5", "shufflenet_v2_x2_0"];

/// Each size's stage output channels (stem, three stages, last convolution); the stages repeat
/// 4, 8 and 4 units in every size.
fn channels(name: &str) -> Option<[i64; 5]> {
    Some(match name {
        "shufflenet_v2_x0_5" => [24, 48, 96, 192, 1024],
        "shufflenet_v2_x1_0" => [24, 116, 232, 464, 1024],
        "shufflenet_v2_x1_5" => [24, 176, 352, 704, 1024],
        "shufflenet_v2_x2_0" => [24, 244, 488, 976, 2048],
        _ => return None,
    })
}

/// A convolution without bias, PyTorch's default initialisation.
fn conv(p: nn::Path, (c_in, c_out, k, stride, groups): (i64, i64, i64, i64, i64)) -> nn::Conv2D {
    let padding = (k - 1) / 2;
    conv2d(
        &p,
        c_in,
        c_out,
        k,
        ConvConfig { stride, padding, groups, bias: false, ..Default::default() },
    )
}

/// The convolution at `seq / i` and its BatchNorm at `seq / (i + 1)`, one step of a branch.
fn conv_bn(
    seq: &nn::Path,
    i: usize,
    shape: (i64, i64, i64, i64, i64),
    sync: &SyncSlot,
) -> ConvNorm {
    ConvNorm::new(seq, i, conv(seq / i, shape), sync, BN)
}

/// torchvision's ShuffleNet V2 `InvertedResidual`: `branch1` (downsampling units only:
/// depthwise 3x3, 1x1 with ReLU) and `branch2` (1x1 with ReLU, depthwise 3x3, 1x1 with ReLU).
#[derive(Debug)]
struct Unit {
    branch1: Option<[ConvNorm; 2]>,
    branch2: [ConvNorm; 3],
}

impl Unit {
    fn new(p: &nn::Path, c_in: i64, c_out: i64, stride: i64, sync: &SyncSlot) -> Unit {
        let half = c_out / 2;
        let branch1 = (stride > 1).then(|| {
            let b = p / "branch1";
            [
                conv_bn(&b, 0, (c_in, c_in, 3, stride, c_in), sync),
                conv_bn(&b, 2, (c_in, half, 1, 1, 1), sync),
            ]
        });
        let b = p / "branch2";
        let first_in = if stride > 1 { c_in } else { half };
        let branch2 = [
            conv_bn(&b, 0, (first_in, half, 1, 1, 1), sync),
            conv_bn(&b, 3, (half, half, 3, stride, half), sync),
            conv_bn(&b, 5, (half, half, 1, 1, 1), sync),
        ];
        Unit { branch1, branch2 }
    }

    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let branch2 = |x: &Tensor| {
            let [a, b, c] = &self.branch2;
            let y = a.forward_t(x, train).relu();
            c.forward_t(&b.forward_t(&y, train), train).relu()
        };
        let out = match &self.branch1 {
            None => {
                let halves = xs.chunk(2, 1);
                Tensor::cat(&[halves[0].shallow_clone(), branch2(&halves[1])], 1)
            }
            Some([a, b]) => {
                let left = b.forward_t(&a.forward_t(xs, train), train).relu();
                Tensor::cat(&[left, branch2(xs)], 1)
            }
        };
        channel_shuffle(&out, 2)
    }
}

/// torchvision's `channel_shuffle`: the channels regrouped so that each group's channels
/// interleave with the others'.
fn channel_shuffle(xs: &Tensor, groups: i64) -> Tensor {
    let (b, c, h, w) = xs.size4().expect("a [N, C, H, W] batch");
    xs.view([b, groups, c / groups, h, w]).transpose(1, 2).contiguous().view([b, c, h, w])
}

/// torchvision's ShuffleNet V2, built by [`shufflenet_v2`].
#[derive(Debug)]
pub struct ShuffleNetV2 {
    conv1: ConvNorm,
    units: Vec<Unit>,
    conv5: ConvNorm,
    fc: nn::Linear,
}

/// torchvision's `shufflenet_v2_x1_0(num_classes=classes)` (and `x0_5`, `x1_5`, `x2_0`)
/// under `path` (`name` one of [`SHUFFLENET_V2_NAMES`]): its names (`conv1.*`,
/// `stage<2-4>.<i>.branch<1,2>.*`, `conv5.*`, `fc`), parameter order and initialisation
/// (PyTorch's defaults, drawn in torchvision's order: after `tch::manual_seed(s)` the weights
/// torchvision's network has after `torch.manual_seed(s)`). Errors: another name.
///
/// ```
/// # fn main() -> trainbook::Result<()> {
/// use tch::nn::{ModuleT, VarStore};
/// use tch::{Device, Kind, Tensor};
/// use trainbook::models::shufflenet_v2;
/// let vs = VarStore::new(Device::Cpu);
/// let model = shufflenet_v2(&vs.root(), "shufflenet_v2_x0_5", 10)?;
/// let images = Tensor::zeros([2, 3, 64, 64], (Kind::Float, Device::Cpu));
/// assert_eq!(model.forward_t(&images, false).size(), [2, 10]);
/// # Ok(()) }
/// ```
pub fn shufflenet_v2(path: &nn::Path, name: &str, classes: i64) -> Result<ShuffleNetV2> {
    let widths = channels(name).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "model {name:?}: the ShuffleNet V2 sizes are {}",
            SHUFFLENET_V2_NAMES.join(", ")
        ))
    })?;
    let sync = SyncSlot::default();
    let conv1 = conv_bn(&(path / "conv1"), 0, (3, widths[0], 3, 2, 1), &sync);
    let mut units = Vec::new();
    let mut c_in = widths[0];
    for (s, (repeats, c_out)) in [4, 8, 4].into_iter().zip(&widths[1..4]).enumerate() {
        let stage = path / format!("stage{}", s + 2);
        for i in 0..repeats {
            let stride = if i == 0 { 2 } else { 1 };
            units.push(Unit::new(&(&stage / i), c_in, *c_out, stride, &sync));
            c_in = *c_out;
        }
    }
    let conv5 = conv_bn(&(path / "conv5"), 0, (c_in, widths[4], 1, 1, 1), &sync);
    let fc = linear(&(path / "fc"), widths[4], classes);
    Ok(ShuffleNetV2 { conv1, units, conv5, fc })
}

impl ModuleT for ShuffleNetV2 {
    /// torchvision's `forward`: stem, max pool, the stages, the last convolution, the mean
    /// over the picture, `fc`.
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let mut x = self.conv1.forward_t(xs, train).relu().max_pool2d(
            [3, 3],
            [2, 2],
            [1, 1],
            [1, 1],
            false,
        );
        for u in &self.units {
            x = u.forward_t(&x, train);
        }
        let x = self.conv5.forward_t(&x, train).relu();
        x.mean_dim(&[2i64, 3][..], false, None::<tch::Kind>).apply(&self.fc)
    }
}
