//! The residual blocks of torchvision's ResNets, with its parameter and buffer names: the
//! `BasicBlock` of ResNet18/34 (two 3x3 convolutions) and the `Bottleneck` of ResNet50/101/152
//! (1x1, 3x3, 1x1 with 4x the channels out; the stride on the 3x3 convolution, i.e. "ResNet
//! v1.5"), each with a `downsample` (1x1 convolution and BatchNorm) when its shape changes.
//! A bottleneck's 3x3 convolution may be grouped and its width scaled (torchvision's `groups`
//! and `width_per_group`: ResNeXt and Wide ResNet).
use tch::nn::init::{FanInOut, NonLinearity, NormalOrUniform};
use tch::nn::{self, ConvConfig, Init, ModuleT};
use tch::Tensor;

use super::batch_norm::{BatchNorm2d, SyncSlot};

/// torchvision's conv initialisation: kaiming normal, fan_out, ReLU.
pub(super) fn conv(
    p: nn::Path,
    c_in: i64,
    c_out: i64,
    k: i64,
    stride: i64,
    padding: i64,
) -> nn::Conv2D {
    grouped_conv(p, (c_in, c_out, 1), k, stride, padding)
}

/// [`conv`] in `groups` groups (MobileNetV3's convolutions too: the same initialisation).
pub(super) fn grouped_conv(
    p: nn::Path,
    (c_in, c_out, groups): (i64, i64, i64),
    k: i64,
    stride: i64,
    padding: i64,
) -> nn::Conv2D {
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
        ConvConfig { stride, padding, groups, bias: false, ws_init, ..Default::default() },
    )
}

/// BatchNorm as torchvision initialises it (weight 1, bias 0). Synchronised over the ranks
/// through `sync` once converted.
pub(super) fn bn(p: nn::Path, c: i64, sync: &SyncSlot) -> BatchNorm2d {
    BatchNorm2d::new(p, c, sync)
}

/// The `downsample` branch, `Sequential(conv1x1(c_in, c_out, stride), BatchNorm2d(c_out))`,
/// that torchvision adds to a block's first block when the stride or the channels change.
fn downsample(
    p: &nn::Path,
    (c_in, c_out, stride): (i64, i64, i64),
    sync: &SyncSlot,
) -> Option<(nn::Conv2D, BatchNorm2d)> {
    (stride != 1 || c_in != c_out).then(|| {
        let down = p / "downsample";
        (conv(&down / "0", c_in, c_out, 1, stride, 0), bn(&down / "1", c_out, sync))
    })
}

/// A residual block with torchvision's names: its `BasicBlock` (`conv1`, `conv2`, both 3x3) or
/// its `Bottleneck` (`conv1` 1x1, `conv2` 3x3, `conv3` 1x1 to 4x the width; groups 1, base
/// width 64), each with a `downsample` when its shape changes.
#[derive(Debug)]
pub(super) struct Block {
    conv1: nn::Conv2D,
    bn1: BatchNorm2d,
    conv2: nn::Conv2D,
    bn2: BatchNorm2d,
    /// `conv3`, `bn3`: only in a bottleneck.
    conv3: Option<(nn::Conv2D, BatchNorm2d)>,
    downsample: Option<(nn::Conv2D, BatchNorm2d)>,
}

/// A bottleneck's 3x3 convolution: its groups and the width of each group at `planes` 64
/// (torchvision's `groups` and `width_per_group`; a ResNet's are 1 and 64).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Grouping {
    pub(super) groups: i64,
    pub(super) width_per_group: i64,
}

impl Grouping {
    /// A plain ResNet's: one group, width 64.
    pub(super) const PLAIN: Grouping = Grouping { groups: 1, width_per_group: 64 };
}

/// Which residual block a ResNet stacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum BlockKind {
    /// Two 3x3 convolutions (ResNet18/34).
    Basic,
    /// 1x1, 3x3, 1x1 convolutions (ResNet50/101/152).
    Bottleneck,
}

impl BlockKind {
    /// The ratio of a block's output channels to its width (`planes`): 1 or 4.
    pub(super) fn expansion(self) -> i64 {
        match self {
            BlockKind::Basic => 1,
            BlockKind::Bottleneck => 4,
        }
    }
}

impl Block {
    /// A block of `kind` under `p` taking `c_in` channels, of `planes` (`planes * expansion`
    /// channels out), with `stride` on its 3x3 convolution; a bottleneck's inner width is
    /// torchvision's `int(planes * width_per_group / 64) * groups`, its 3x3 convolution in
    /// `groups` groups; its BatchNorm layers synchronise through `sync`.
    pub(super) fn new(
        (kind, grouping): (BlockKind, Grouping),
        p: &nn::Path,
        (c_in, planes, stride): (i64, i64, i64),
        sync: &SyncSlot,
    ) -> Self {
        let c_out = planes * kind.expansion();
        let Grouping { groups, width_per_group } = grouping;
        let width = planes * width_per_group / 64 * groups;
        // Created in torchvision's order (conv1, bn1, conv2, bn2[, conv3, bn3], downsample) so
        // that the parameter order, which DDP's buckets follow, is torch's.
        let (k1, s1, s2) = match kind {
            BlockKind::Basic => (3, stride, 1),
            BlockKind::Bottleneck => (1, 1, stride),
        };
        let (conv1, bn1) =
            (conv(p / "conv1", c_in, width, k1, s1, k1 / 2), bn(p / "bn1", width, sync));
        let conv2 = grouped_conv(p / "conv2", (width, width, groups), 3, s2, 1);
        let bn2 = bn(p / "bn2", width, sync);
        let conv3 = (kind == BlockKind::Bottleneck)
            .then(|| (conv(p / "conv3", width, c_out, 1, 1, 0), bn(p / "bn3", c_out, sync)));
        let downsample = downsample(p, (c_in, c_out, stride), sync);
        Block { conv1, bn1, conv2, bn2, conv3, downsample }
    }
}

impl ModuleT for Block {
    /// torchvision's `forward`, its in-place steps included (`ReLU(inplace=True)`,
    /// `out += identity`): the same values, and no new buffer for each ReLU and the sum (their
    /// inputs, BatchNorm outputs, are not needed by any backward).
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let mut out = xs
            .apply(&self.conv1)
            .apply_t(&self.bn1, train)
            .relu_()
            .apply(&self.conv2)
            .apply_t(&self.bn2, train);
        if let Some((conv3, bn3)) = &self.conv3 {
            out = out.relu_().apply(conv3).apply_t(bn3, train);
        }
        let identity = match &self.downsample {
            Some((c, b)) => xs.apply(c).apply_t(b, train),
            None => xs.shallow_clone(),
        };
        let _ = out.g_add_(&identity);
        out.relu_()
    }
}
