//! torchvision's `Conv2dNormActivation` (`torchvision.ops.misc`): a convolution without bias
//! (`0`), its BatchNorm (`1`) and an activation, as the MobileNets build their layers; the
//! same pair as two entries of one `nn.Sequential` (MNASNet, ShuffleNet V2); and
//! `torchvision.ops.SqueezeExcitation` with its activation and gate.
use tch::nn;
use tch::Tensor;

use super::batch_norm::{BatchNorm2d, SyncSlot};
use super::resnet_blocks::grouped_conv;

/// A convolution without bias, torchvision's initialisation (Kaiming normal, fan-out), padded
/// to keep the size at stride 1.
pub(super) fn conv(
    p: nn::Path,
    (c_in, c_out, k, stride, groups): (i64, i64, i64, i64, i64),
) -> nn::Conv2D {
    grouped_conv(p, (c_in, c_out, groups), k, stride, (k - 1) / 2)
}

/// A 1x1 convolution with bias (squeeze-and-excitation's), weight then bias as torch registers
/// them; torchvision's initialisation (Kaiming normal, bias 0).
pub(super) fn conv1x1_bias(p: nn::Path, c_in: i64, c_out: i64) -> nn::Conv2D {
    let mut c = conv(p.clone(), (c_in, c_out, 1, 1, 1));
    c.bs = Some(p.var("bias", &[c_out], nn::Init::Const(0.0)));
    c
}

/// The activation after a convolution and its BatchNorm.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Act {
    Relu,
    /// `ReLU6` (libtorch's `relu6`, its `hardtanh(x, 0, 6)`).
    Relu6,
    Hardswish,
    /// `SiLU` (EfficientNet's).
    Silu,
    None,
}

impl Act {
    /// The activation of `y`.
    pub(super) fn apply(self, y: Tensor) -> Tensor {
        match self {
            Act::Relu => y.relu(),
            Act::Relu6 => y.relu6(),
            Act::Hardswish => y.hardswish(),
            Act::Silu => y.silu(),
            Act::None => y,
        }
    }
}

/// torchvision's `Conv2dNormActivation`: convolution (`0`), BatchNorm (`1`), activation.
#[derive(Debug)]
pub(super) struct ConvBn {
    conv: nn::Conv2D,
    bn: BatchNorm2d,
    act: Act,
}

impl ConvBn {
    /// `shape` is (input channels, output channels, kernel, stride, groups); `bn` the
    /// BatchNorm's (eps, momentum).
    pub(super) fn new(
        p: &nn::Path,
        shape: (i64, i64, i64, i64, i64),
        act: Act,
        sync: &SyncSlot,
        bn: (f64, f64),
    ) -> ConvBn {
        let conv = conv(p / "0", shape);
        let bn = BatchNorm2d::with(p / "1", shape.1, sync, bn);
        ConvBn { conv, bn, act }
    }

    pub(super) fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        self.act.apply(xs.apply(&self.conv).apply_t(&self.bn, train))
    }

    /// The channels this layer puts out.
    pub(super) fn out_channels(&self) -> i64 {
        self.conv.ws.size()[0]
    }
}

/// The top of the MobileNetV2 and EfficientNet: the last layer, global average pooling,
/// flatten, dropout with `dropout`, then the linear classifier `fc`.
pub(super) fn pooled_head(
    x: &Tensor,
    last: &ConvBn,
    (dropout, fc): (f64, &nn::Linear),
    train: bool,
) -> Tensor {
    let x = last.forward_t(x, train).adaptive_avg_pool2d([1, 1]).flatten(1, -1);
    x.dropout(dropout, train).apply(fc)
}

/// A convolution at `seq / i` and its BatchNorm at `seq / (i + 1)`: two entries of one
/// `nn.Sequential` (MNASNet's and ShuffleNet V2's layers), without an activation.
#[derive(Debug)]
pub(super) struct SeqConvBn {
    conv: nn::Conv2D,
    bn: BatchNorm2d,
}

impl SeqConvBn {
    /// `conv`, built at `seq / i` with the model's initialisation, and a BatchNorm of its
    /// output channels with `bn`'s (eps, momentum) at `seq / (i + 1)`.
    pub(super) fn new(
        seq: &nn::Path,
        i: usize,
        conv: nn::Conv2D,
        sync: &SyncSlot,
        bn: (f64, f64),
    ) -> SeqConvBn {
        let channels = conv.ws.size()[0];
        SeqConvBn { conv, bn: BatchNorm2d::with(seq / (i + 1), channels, sync, bn) }
    }

    pub(super) fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        xs.apply(&self.conv).apply_t(&self.bn, train)
    }
}

/// The gate of a squeeze-and-excitation (torchvision's `scale_activation`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Gate {
    Sigmoid,
    Hardsigmoid,
}

/// `torchvision.ops.SqueezeExcitation`: the mean over the picture, the 1x1 convolution `fc1`,
/// `act`, the 1x1 convolution `fc2`, the gate, times the input.
#[derive(Debug)]
pub(super) struct SqueezeExcitation {
    pub(super) fc1: nn::Conv2D,
    pub(super) fc2: nn::Conv2D,
    pub(super) act: Act,
    pub(super) gate: Gate,
}

impl SqueezeExcitation {
    pub(super) fn forward(&self, xs: &Tensor) -> Tensor {
        let scale = self.act.apply(xs.adaptive_avg_pool2d([1, 1]).apply(&self.fc1));
        let scale = scale.apply(&self.fc2);
        let scale = match self.gate {
            Gate::Sigmoid => scale.sigmoid(),
            Gate::Hardsigmoid => scale.hardsigmoid(),
        };
        scale * xs
    }
}
