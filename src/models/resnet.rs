//! ResNet34 with torchvision's parameter and buffer names (`conv1`, `bn1`, `layer1.0.conv1`,
//! `layer2.0.downsample.0`, ...) and a replaceable head. The course's head is
//! `fc = Sequential(Linear(512, 512), ReLU, Linear(512, classes))`, i.e. `fc.0.*` and `fc.2.*`.
use super::layers::linear;
use tch::nn::init::{FanInOut, NonLinearity, NormalOrUniform};
use tch::nn::{self, ConvConfig, Init, ModuleT};
use tch::Tensor;

/// torchvision's conv initialisation: kaiming normal, fan_out, ReLU.
fn conv(p: nn::Path, c_in: i64, c_out: i64, k: i64, stride: i64, padding: i64) -> nn::Conv2D {
    let ws_init = Init::Kaiming {
        dist: NormalOrUniform::Normal,
        fan: FanInOut::FanOut,
        non_linearity: NonLinearity::ReLU,
    };
    nn::conv2d(
        p,
        c_in,
        c_out,
        k,
        ConvConfig { stride, padding, bias: false, ws_init, ..Default::default() },
    )
}

fn bn(p: nn::Path, c: i64) -> nn::BatchNorm {
    nn::batch_norm2d(p, c, Default::default())
}

#[derive(Debug)]
struct BasicBlock {
    conv1: nn::Conv2D,
    bn1: nn::BatchNorm,
    conv2: nn::Conv2D,
    bn2: nn::BatchNorm,
    downsample: Option<(nn::Conv2D, nn::BatchNorm)>,
}

impl BasicBlock {
    fn new(p: &nn::Path, c_in: i64, c_out: i64, stride: i64) -> Self {
        // Created in torchvision's order (conv1, bn1, conv2, bn2, downsample) so that the
        // parameter order, which DDP's buckets follow, is torch's.
        let (conv1, bn1) = (conv(p / "conv1", c_in, c_out, 3, stride, 1), bn(p / "bn1", c_out));
        let (conv2, bn2) = (conv(p / "conv2", c_out, c_out, 3, 1, 1), bn(p / "bn2", c_out));
        let downsample = (stride != 1 || c_in != c_out).then(|| {
            (
                conv(p / "downsample" / "0", c_in, c_out, 1, stride, 0),
                bn(p / "downsample" / "1", c_out),
            )
        });
        BasicBlock { conv1, bn1, conv2, bn2, downsample }
    }
}

impl ModuleT for BasicBlock {
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let out = xs
            .apply(&self.conv1)
            .apply_t(&self.bn1, train)
            .relu()
            .apply(&self.conv2)
            .apply_t(&self.bn2, train);
        let identity = match &self.downsample {
            Some((c, b)) => xs.apply(c).apply_t(b, train),
            None => xs.shallow_clone(),
        };
        (out + identity).relu()
    }
}

/// The classification head that replaces torchvision's `fc`.
#[derive(Debug)]
pub enum Head {
    /// torchvision's own `fc = Linear(512, classes)`.
    Linear(nn::Linear),
    /// The course's `fc = Sequential(Linear(512, 512), ReLU, Linear(512, classes))`.
    Mlp(nn::Linear, nn::Linear),
}

/// torchvision's ResNet built from basic blocks (`torchvision.models.resnet34`), with the same
/// parameter and buffer names, so torchvision's weights load into it (saved as safetensors)
/// and its weights load into torchvision. Takes `[N, 3, H, W]` images (224x224 for ImageNet
/// weights, normalised with [`Normalize::imagenet`](crate::transforms::Normalize::imagenet))
/// and returns `[N, classes]` logits; `forward_t(x, train)` uses batch statistics in
/// BatchNorm (and updates the running ones) only when `train` is true. Build it with
/// [`resnet34`] or [`resnet34_classifier`].
///
/// # Example
///
/// Fine-tuning from torchvision's ImageNet weights (exported from PyTorch with
/// `safetensors.torch.save_file(torchvision.models.resnet34(weights="DEFAULT").state_dict(), f)`):
///
/// ```no_run
/// # fn main() -> trainbook::Result<()> {
/// use std::path::Path;
/// use tch::nn::{ModuleT, VarStore};
/// use tch::{Device, Kind, Tensor};
/// use trainbook::models::{freeze_backbone, load_safetensors, resnet34_classifier};
/// let mut vs = VarStore::new(Device::Cpu);
/// let model = resnet34_classifier(&vs.root(), 3);
/// // Not strict: the file's `fc.weight`/`fc.bias` do not fit the new head, which stays random.
/// let report = load_safetensors(&mut vs, Path::new("resnet34.safetensors"), false)?;
/// println!("new head: {:?}", report.missing);
/// freeze_backbone(&vs, true); // train only `fc.*`
/// let images = Tensor::zeros([2, 3, 224, 224], (Kind::Float, Device::Cpu));
/// assert_eq!(model.forward_t(&images, false).size(), [2, 3]);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ResNet {
    conv1: nn::Conv2D,
    bn1: nn::BatchNorm,
    layers: Vec<Vec<BasicBlock>>,
    head: Head,
}

/// Which head [`resnet34`] builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeadKind {
    /// torchvision's `fc = Linear(512, classes)` (parameters `fc.weight`, `fc.bias`).
    Linear,
    /// The course's `fc = Sequential(Linear(512, 512), ReLU, Linear(512, classes))`
    /// (parameters `fc.0.*`, `fc.2.*`).
    Mlp,
}

/// ResNet34 (basic blocks 3, 4, 6, 3) with `classes` outputs and the given head, under `path`
/// (usually `vs.root()`): `torchvision.models.resnet34(num_classes=classes)` for
/// [`HeadKind::Linear`]. Convolutions are initialised as torchvision's (Kaiming normal,
/// fan-out, ReLU), BatchNorm as tch's `batch_norm2d` (weight uniform in [0, 1), bias 0), the
/// head as `torch.nn.Linear`.
///
/// ```no_run
/// use tch::nn::{ModuleT, VarStore};
/// use tch::{Device, Kind, Tensor};
/// use trainbook::models::{resnet34, HeadKind};
/// let vs = VarStore::new(Device::Cpu);
/// let model = resnet34(&vs.root(), 1000, HeadKind::Linear);
/// let images = Tensor::zeros([2, 3, 224, 224], (Kind::Float, Device::Cpu));
/// assert_eq!(model.forward_t(&images, true).size(), [2, 1000]);
/// ```
pub fn resnet34(path: &nn::Path, classes: i64, head: HeadKind) -> ResNet {
    // The stem first: parameters are created in torchvision's order (DDP's buckets follow it).
    let (conv1, bn1) = (conv(path / "conv1", 3, 64, 7, 2, 3), bn(path / "bn1", 64));
    let mut layers = Vec::new();
    let mut c_in = 64;
    for (i, (&blocks, &c_out)) in [3i64, 4, 6, 3].iter().zip(&[64i64, 128, 256, 512]).enumerate() {
        let p = path / format!("layer{}", i + 1);
        let stride = if i == 0 { 1 } else { 2 };
        let layer = (0..blocks)
            .map(|b| {
                BasicBlock::new(
                    &(&p / b),
                    if b == 0 { c_in } else { c_out },
                    c_out,
                    if b == 0 { stride } else { 1 },
                )
            })
            .collect();
        layers.push(layer);
        c_in = c_out;
    }
    let fc = path / "fc";
    let head = match head {
        HeadKind::Linear => Head::Linear(linear(&fc, 512, classes)),
        HeadKind::Mlp => {
            Head::Mlp(linear(&(&fc / "0"), 512, 512), linear(&(&fc / "2"), 512, classes))
        }
    };
    ResNet { conv1, bn1, layers, head }
}

/// The course's model: ResNet34 with the `fc.0`/`fc.2` MLP head and `classes` outputs.
pub fn resnet34_classifier(path: &nn::Path, classes: i64) -> ResNet {
    resnet34(path, classes, HeadKind::Mlp)
}

impl ResNet {
    /// The 512-dimensional pooled features (everything but the head).
    pub fn features(&self, xs: &Tensor, train: bool) -> Tensor {
        let mut x = xs.apply(&self.conv1).apply_t(&self.bn1, train).relu().max_pool2d(
            [3, 3],
            [2, 2],
            [1, 1],
            [1, 1],
            false,
        );
        for layer in &self.layers {
            for block in layer {
                x = block.forward_t(&x, train);
            }
        }
        x.adaptive_avg_pool2d([1, 1]).flatten(1, -1)
    }
}

impl ModuleT for ResNet {
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let f = self.features(xs, train);
        match &self.head {
            Head::Linear(fc) => f.apply(fc),
            Head::Mlp(a, b) => f.apply(a).relu().apply(b),
        }
    }
}

/// Freezes (or unfreezes) everything but the head `fc.*`: frozen parameters get no gradient,
/// so the optimizer leaves them alone. (The course's `require_grad = False` typo froze nothing.)
pub fn freeze_backbone(vs: &nn::VarStore, freeze: bool) {
    for (name, t) in vs.variables() {
        if name.starts_with("fc.")
            || name.ends_with("running_mean")
            || name.ends_with("running_var")
        {
            continue;
        }
        let _ = t.set_requires_grad(!freeze);
    }
}
