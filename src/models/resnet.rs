//! torchvision's ResNet family (ResNet18, 34, 50, 101 and 152) with its parameter and buffer
//! names (`conv1`, `bn1`, `layer1.0.conv1`, `layer2.0.downsample.0`, `fc`, ...), so that
//! torchvision's weights load by name, and a replaceable head. The course's head is
//! `fc = Sequential(Linear(512, 512), ReLU, Linear(512, classes))`, i.e. `fc.0.*` and `fc.2.*`;
//! for ResNet50/101/152, whose pooled features are 2048 wide, it starts with
//! `Linear(2048, 512)`. The blocks are in `resnet_blocks`.
use super::batch_norm::{BatchNorm2d, SyncSlot};
use super::layers::linear;
use super::resnet_blocks::{bn, conv, Block, BlockKind, Grouping};
use crate::{Error, Result};
use tch::nn::{self, ModuleT};
use tch::Tensor;

/// The depths [`resnet`] builds: torchvision's `resnet18` to `resnet152`.
pub const RESNET_DEPTHS: [usize; 5] = [18, 34, 50, 101, 152];

/// torchvision's blocks per stage (`layer1` to `layer4`) for each depth of [`RESNET_DEPTHS`].
fn architecture(depth: usize) -> Option<(BlockKind, [i64; 4])> {
    Some(match depth {
        18 => (BlockKind::Basic, [2, 2, 2, 2]),
        34 => (BlockKind::Basic, [3, 4, 6, 3]),
        50 => (BlockKind::Bottleneck, [3, 4, 6, 3]),
        101 => (BlockKind::Bottleneck, [3, 4, 23, 3]),
        152 => (BlockKind::Bottleneck, [3, 8, 36, 3]),
        _ => return None,
    })
}

/// The width of the course head's hidden layer (`fc.0`).
const MLP_WIDTH: i64 = 512;

/// The classification head that replaces torchvision's `fc`. `features` below is the width
/// of the pooled features: 512 for ResNet18/34, 2048 for ResNet50/101/152.
#[derive(Debug)]
pub enum Head {
    /// torchvision's own `fc = Linear(features, classes)`.
    Linear(nn::Linear),
    /// The course's `fc = Sequential(Linear(features, 512), ReLU, Linear(512, classes))`.
    Mlp(nn::Linear, nn::Linear),
}

/// torchvision's ResNet (`torchvision.models.resnet18` ... `resnet152`), with the same
/// parameter and buffer names, so torchvision's weights load into it (saved as safetensors)
/// and its weights load into torchvision. Takes `[N, 3, H, W]` images (224x224 for ImageNet
/// weights, normalised with [`Normalize::imagenet`](crate::transforms::Normalize::imagenet))
/// and returns `[N, classes]` logits; `forward_t(x, train)` uses batch statistics in
/// BatchNorm (and updates the running ones) only when `train` is true. Build it with
/// [`resnet`] (any depth of [`RESNET_DEPTHS`]), [`resnet18`], [`resnet34`], [`resnet50`] or the
/// course-head variants [`resnet18_classifier`], [`resnet34_classifier`],
/// [`resnet50_classifier`].
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
    bn1: BatchNorm2d,
    layers: Vec<Vec<Block>>,
    head: Head,
    features: i64,
    /// Shared by every BatchNorm layer: where [`convert_sync_batchnorm`](ResNet::convert_sync_batchnorm) puts the group.
    sync: SyncSlot,
}

/// Which head [`resnet`] builds (the same options for every depth); `features` is the width
/// of the pooled features, 512 for ResNet18/34 and 2048 for ResNet50/101/152.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeadKind {
    /// torchvision's `fc = Linear(features, classes)` (parameters `fc.weight`, `fc.bias`).
    Linear,
    /// The course's `fc = Sequential(Linear(features, 512), ReLU, Linear(512, classes))`
    /// (parameters `fc.0.*`, `fc.2.*`).
    Mlp,
}

/// The ResNet of `depth` (18, 34, 50, 101 or 152: [`RESNET_DEPTHS`]) with `classes` outputs
/// and the given head, under `path` (usually `vs.root()`):
/// `torchvision.models.resnet{depth}(num_classes=classes)` for [`HeadKind::Linear`]. Depths 18
/// and 34 stack basic blocks, 50 and up bottlenecks (with the stride on their 3x3 convolution,
/// as torchvision's "ResNet v1.5"). Initialised as torchvision's: convolutions Kaiming normal
/// (fan-out, ReLU), BatchNorm weight 1 and bias 0, the head as `torch.nn.Linear` (uniform within
/// `1/sqrt(fan_in)`; the same distributions, not the same draws); parameters are created in
/// torchvision's order, which DDP's buckets follow. Errors: [`Error::InvalidArgument`] naming
/// `depth` when it is not one of [`RESNET_DEPTHS`].
///
/// ```
/// # fn main() -> trainbook::Result<()> {
/// use tch::nn::{ModuleT, VarStore};
/// use tch::{Device, Kind, Tensor};
/// use trainbook::models::{resnet, HeadKind};
/// let vs = VarStore::new(Device::Cpu);
/// let model = resnet(&vs.root(), 18, 10, HeadKind::Linear)?;
/// assert_eq!(model.num_features(), 512);
/// let images = Tensor::zeros([2, 3, 64, 64], (Kind::Float, Device::Cpu));
/// assert_eq!(model.forward_t(&images, false).size(), [2, 10]);
/// assert!(resnet(&vs.root(), 20, 10, HeadKind::Linear).is_err());
/// # Ok(()) }
/// ```
pub fn resnet(path: &nn::Path, depth: usize, classes: i64, head: HeadKind) -> Result<ResNet> {
    if architecture(depth).is_none() {
        return Err(Error::InvalidArgument(format!(
            "ResNet depth {depth}: torchvision's ResNets have depths {RESNET_DEPTHS:?}"
        )));
    }
    Ok(build(path, depth, classes, head))
}

/// torchvision's names of the residual networks trainbook builds: the ResNets, the ResNeXts
/// (grouped bottlenecks: `resnext50_32x4d` has 32 groups of width 4) and the Wide ResNets
/// (bottlenecks twice as wide).
pub const RESNET_NAMES: [&str; 10] = [
    "resnet18",
    "resnet34",
    "resnet50",
    "resnet101",
    "resnet152",
    "resnext50_32x4d",
    "resnext101_32x8d",
    "resnext101_64x4d",
    "wide_resnet50_2",
    "wide_resnet101_2",
];

/// The depth and bottleneck grouping of a name of [`RESNET_NAMES`] (torchvision's
/// `_resnet(Bottleneck, layers, ...)` arguments).
fn variant(name: &str) -> Option<(usize, Grouping)> {
    let grouped = |depth, groups, width_per_group| (depth, Grouping { groups, width_per_group });
    Some(match name {
        "resnext50_32x4d" => grouped(50, 32, 4),
        "resnext101_32x8d" => grouped(101, 32, 8),
        "resnext101_64x4d" => grouped(101, 64, 4),
        "wide_resnet50_2" => grouped(50, 1, 128),
        "wide_resnet101_2" => grouped(101, 1, 128),
        _ => {
            let depth: usize = name.strip_prefix("resnet")?.parse().ok()?;
            architecture(depth)?;
            (depth, Grouping::PLAIN)
        }
    })
}

/// The network torchvision builds as `torchvision.models.get_model(name, num_classes=classes)`
/// for a name of [`RESNET_NAMES`] (`"resnext50_32x4d"`, `"wide_resnet50_2"`, ...), with the
/// given head, its names and parameter order torchvision's. Errors: [`Error::InvalidArgument`]
/// naming `name` when it is not one of them.
///
/// ```
/// # fn main() -> trainbook::Result<()> {
/// use tch::nn::{ModuleT, VarStore};
/// use tch::{Device, Kind, Tensor};
/// use trainbook::models::{resnet_by_name, HeadKind};
/// let vs = VarStore::new(Device::Cpu);
/// let model = resnet_by_name(&vs.root(), "resnext50_32x4d", 10, HeadKind::Linear)?;
/// assert_eq!(vs.variables()["layer1.0.conv2.weight"].size(), [128, 4, 3, 3]); // 32 groups of 4
/// let images = Tensor::zeros([1, 3, 64, 64], (Kind::Float, Device::Cpu));
/// assert_eq!(model.forward_t(&images, false).size(), [1, 10]);
/// assert!(resnet_by_name(&vs.root(), "resnext18", 10, HeadKind::Linear).is_err());
/// # Ok(()) }
/// ```
pub fn resnet_by_name(path: &nn::Path, name: &str, classes: i64, head: HeadKind) -> Result<ResNet> {
    let (depth, grouping) = variant(name).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "model {name:?}: the residual networks are {RESNET_NAMES:?}"
        ))
    })?;
    Ok(build_grouped(path, (depth, grouping), classes, head))
}

/// [`resnet`] for a depth of [`RESNET_DEPTHS`].
fn build(path: &nn::Path, depth: usize, classes: i64, head: HeadKind) -> ResNet {
    build_grouped(path, (depth, Grouping::PLAIN), classes, head)
}

/// [`build`] with the bottlenecks' `grouping`.
fn build_grouped(
    path: &nn::Path,
    (depth, grouping): (usize, Grouping),
    classes: i64,
    head: HeadKind,
) -> ResNet {
    let (block, blocks) = architecture(depth).expect("one of RESNET_DEPTHS");
    // The stem first: parameters are created in torchvision's order (DDP's buckets follow it).
    let sync = SyncSlot::default();
    let (conv1, bn1) = (conv(path / "conv1", 3, 64, 7, 2, 3), bn(path / "bn1", 64, &sync));
    let mut layers = Vec::new();
    let mut c_in = 64;
    for (i, &n) in blocks.iter().enumerate() {
        let p = path / format!("layer{}", i + 1);
        let planes = 64 << i;
        let mut layer = Vec::new();
        for b in 0..n {
            let stride = if i > 0 && b == 0 { 2 } else { 1 };
            layer.push(Block::new((block, grouping), &(&p / b), (c_in, planes, stride), &sync));
            c_in = planes * block.expansion();
        }
        layers.push(layer);
    }
    let fc = path / "fc";
    let head = match head {
        HeadKind::Linear => Head::Linear(linear(&fc, c_in, classes)),
        HeadKind::Mlp => Head::Mlp(
            linear(&(&fc / "0"), c_in, MLP_WIDTH),
            linear(&(&fc / "2"), MLP_WIDTH, classes),
        ),
    };
    ResNet { conv1, bn1, layers, head, features: c_in, sync }
}

/// ResNet18 (basic blocks 2, 2, 2, 2): [`resnet`] with depth 18.
pub fn resnet18(path: &nn::Path, classes: i64, head: HeadKind) -> ResNet {
    build(path, 18, classes, head)
}

/// ResNet34 (basic blocks 3, 4, 6, 3): [`resnet`] with depth 34,
/// `torchvision.models.resnet34(num_classes=classes)` for [`HeadKind::Linear`].
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
    build(path, 34, classes, head)
}

/// ResNet50 (bottlenecks 3, 4, 6, 3; 2048 features): [`resnet`] with depth 50.
pub fn resnet50(path: &nn::Path, classes: i64, head: HeadKind) -> ResNet {
    build(path, 50, classes, head)
}

/// ResNet18 with the course's `fc.0`/`fc.2` MLP head and `classes` outputs.
pub fn resnet18_classifier(path: &nn::Path, classes: i64) -> ResNet {
    resnet18(path, classes, HeadKind::Mlp)
}

/// The course's model: ResNet34 with the `fc.0`/`fc.2` MLP head and `classes` outputs.
pub fn resnet34_classifier(path: &nn::Path, classes: i64) -> ResNet {
    resnet34(path, classes, HeadKind::Mlp)
}

/// ResNet50 with the course's MLP head (`fc.0 = Linear(2048, 512)`, `fc.2`) and `classes`
/// outputs.
pub fn resnet50_classifier(path: &nn::Path, classes: i64) -> ResNet {
    resnet50(path, classes, HeadKind::Mlp)
}

impl ResNet {
    /// torch's `nn.SyncBatchNorm.convert_sync_batchnorm(model)`: from the next training
    /// forward pass on, every BatchNorm layer normalises with the mean and variance of all
    /// ranks' batches (and updates its running statistics with them), as BatchNorm over the
    /// ranks' concatenated batch would; call it before wrapping the model for DDP, on every
    /// rank. In a world of one it changes nothing (torch's layer also falls back to plain
    /// BatchNorm there). Returns whether the layers now synchronise. Errors: the group's
    /// handle cannot be taken ([`Error::Dist`]).
    ///
    /// ```no_run
    /// # fn main() -> trainbook::Result<()> {
    /// use tch::nn::VarStore;
    /// use trainbook::dist::Dist;
    /// use trainbook::models::resnet34_classifier;
    /// let dist = Dist::init()?;
    /// let vs = VarStore::new(dist.device());
    /// let model = resnet34_classifier(&vs.root(), 3);
    /// model.convert_sync_batchnorm(&dist)?; // 16 images per GPU, statistics over all of them
    /// # Ok(()) }
    /// ```
    pub fn convert_sync_batchnorm(&self, dist: &crate::dist::Dist) -> Result<bool> {
        let group = crate::dist::SyncGroup::of(dist)?;
        let synced = group.is_some();
        self.sync.set(group);
        Ok(synced)
    }

    /// Whether the BatchNorm layers synchronise over the ranks.
    pub fn syncs_batchnorm(&self) -> bool {
        self.sync.group().is_some()
    }

    /// The pooled features (everything but the head), `[N, num_features()]`.
    pub fn features(&self, xs: &Tensor, train: bool) -> Tensor {
        // torchvision's stem: its ReLU is in place too.
        let mut x = xs.apply(&self.conv1).apply_t(&self.bn1, train).relu_().max_pool2d(
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

    /// The width of [`features`](ResNet::features), the head's input (torchvision's
    /// `fc.in_features`): 512 for ResNet18/34, 2048 for ResNet50/101/152.
    pub fn num_features(&self) -> i64 {
        self.features
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

/// Freezes (or unfreezes) everything but the head `fc.*`, for a ResNet of any depth and head:
/// frozen parameters get no gradient, so the optimizer leaves them alone. (The course's
/// `require_grad = False` typo froze nothing.)
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

#[cfg(test)]
mod tests {
    use super::*;
    use tch::nn::VarStore;
    use tch::Device;

    #[test]
    fn depths_have_torchvisions_parameter_counts() {
        // torchvision's counts with the 1000-class `fc` (its model documentation's "params").
        for (depth, want, features) in [(18, 11_689_512, 512), (50, 25_557_032, 2048)] {
            let vs = VarStore::new(Device::Cpu);
            let net = resnet(&vs.root(), depth, 1000, HeadKind::Linear).unwrap();
            let count: i64 = vs.trainable_variables().iter().map(|t| t.numel() as i64).sum();
            assert_eq!((count, net.num_features()), (want, features), "resnet{depth}");
        }
    }

    #[test]
    fn unknown_depth_is_an_invalid_argument_naming_it() {
        let vs = VarStore::new(Device::Cpu);
        let err = resnet(&vs.root(), 20, 3, HeadKind::Mlp).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidArgument(m) if m.contains("depth 20") && m.contains("152")),
            "{err}"
        );
        assert!(vs.variables().is_empty(), "nothing created for a refused depth");
    }
}
