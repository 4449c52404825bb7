//! Linear and convolution layers as PyTorch builds them: parameters registered in PyTorch's
//! order, `weight` then `bias` (tch's `nn::linear`/`nn::conv2d` register the bias first), and
//! initialised by PyTorch's default `reset_parameters`, drawn in its order from libtorch's
//! generator: the weight from `kaiming_uniform_(a=sqrt(5))`, i.e. uniform within
//! `1/sqrt(fan_in)`, then the bias uniform within `1/sqrt(fan_in)`. A model built from them
//! after `tch::manual_seed(s)` starts from the very weights PyTorch's does after
//! `torch.manual_seed(s)` (tests/parity/models_init.rs). The order matters elsewhere too: DDP
//! checks and broadcasts parameters in it, so a trainbook rank and a PyTorch rank can only share
//! a group if the lists agree.
use tch::nn::{self, ConvConfig, Init};
use tch::{Kind, Tensor};

/// The bound of PyTorch's `kaiming_uniform_(w, a=sqrt(5))` for `fan_in`, computed as torch
/// computes it (`gain = sqrt(2 / (1 + a^2))`, `std = gain / sqrt(fan_in)`, `sqrt(3) * std`), so
/// the draws are the same to the last bit.
fn kaiming_uniform_bound(fan_in: i64) -> f64 {
    let gain = (2.0 / (1.0 + 5.0f64)).sqrt();
    let std = gain / (fan_in as f64).sqrt();
    3.0f64.sqrt() * std
}

/// A tensor of `dims` uniform within `bound`, drawn now from libtorch's generator.
fn uniform(dims: &[i64], bound: f64, path: &nn::Path) -> Tensor {
    nn::init::init(Init::Uniform { lo: -bound, up: bound }, dims, path.device())
        .to_kind(Kind::Float)
}

/// `torch.nn.Linear(in_dim, out_dim)` under `path`, initialised as PyTorch does.
///
/// ```
/// use tch::nn::VarStore;
/// let vs = VarStore::new(tch::Device::Cpu);
/// let fc = trainbook::models::linear(&(vs.root() / "fc"), 512, 3);
/// assert_eq!(fc.ws.size(), [3, 512]);
/// assert!(fc.ws.abs().max().double_value(&[]) <= 1.0 / 512f64.sqrt());
/// ```
pub fn linear(path: &nn::Path, in_dim: i64, out_dim: i64) -> nn::Linear {
    let ws = uniform(&[out_dim, in_dim], kaiming_uniform_bound(in_dim), path);
    let bs = uniform(&[out_dim], 1.0 / (in_dim as f64).sqrt(), path);
    nn::Linear { ws: path.var_copy("weight", &ws), bs: Some(path.var_copy("bias", &bs)) }
}

/// `torch.nn.Conv2d(c_in, c_out, k)` under `path` with `config`'s stride, padding, dilation,
/// groups and bias (its `ws_init`/`bs_init` are not used), initialised as PyTorch does.
pub fn conv2d(path: &nn::Path, c_in: i64, c_out: i64, k: i64, config: ConvConfig) -> nn::Conv2D {
    let fan_in = c_in / config.groups * k * k;
    let ws = uniform(&[c_out, c_in / config.groups, k, k], kaiming_uniform_bound(fan_in), path);
    let bs = config.bias.then(|| uniform(&[c_out], 1.0 / (fan_in as f64).sqrt(), path));
    let ws_init = Init::Const(0.0); // replaced by the drawn weights below
    let mut conv = nn::conv2d(path, c_in, c_out, k, ConvConfig { bias: false, ws_init, ..config });
    tch::no_grad(|| conv.ws.copy_(&ws));
    conv.bs = bs.map(|b| path.var_copy("bias", &b));
    conv
}

/// `torch.nn.Conv2d(c_in, c_out, k)` with a bias under `path`, its weight drawn by `config`'s
/// `ws_init` and its bias 0, registered weight first as torch does (torchvision's VGG and
/// SqueezeNet initialise so).
pub(super) fn conv2d_zero_bias(
    path: &nn::Path,
    c_in: i64,
    c_out: i64,
    k: i64,
    config: ConvConfig,
) -> nn::Conv2D {
    let mut conv = nn::conv2d(path, c_in, c_out, k, ConvConfig { bias: false, ..config });
    conv.bs = Some(path.var("bias", &[c_out], Init::Const(0.0)));
    conv
}

/// torchvision's `stochastic_depth(x, p, "row", training)`: in training, each sample's `x`
/// kept with probability `1 - p` (and scaled by its inverse) or zeroed, one draw per sample
/// from libtorch's generator.
pub(super) fn stochastic_depth(xs: Tensor, p: f64, train: bool) -> Tensor {
    if !train || p == 0.0 {
        return xs;
    }
    let survival = 1.0 - p;
    let mut shape = vec![xs.size()[0]];
    shape.resize(xs.dim(), 1);
    let mut noise = Tensor::empty(shape.as_slice(), (xs.kind(), xs.device()));
    let _ = noise.bernoulli_float_(survival);
    if survival > 0.0 {
        let _ = noise.g_div_scalar_(survival);
    }
    xs * noise
}

/// torchvision's `_make_divisible`: `v` rounded to a multiple of `divisor`, not below 90% of it.
pub(super) fn make_divisible(v: f64, divisor: i64) -> i64 {
    let new_v = divisor.max((v + divisor as f64 / 2.0) as i64 / divisor * divisor);
    if (new_v as f64) < 0.9 * v {
        new_v + divisor
    } else {
        new_v
    }
}

/// `conv` with a bias as PyTorch's `Conv2d.reset_parameters` draws it (uniform within
/// `1/sqrt(fan_in)`), registered after the weight as torch does: a layer whose weight a model
/// initialises itself and whose bias it leaves to PyTorch (torchvision's RegNet
/// squeeze-and-excitation).
pub(super) fn conv_default_bias(mut conv: nn::Conv2D, path: nn::Path) -> nn::Conv2D {
    let size = conv.ws.size();
    let (c_out, fan_in) = (size[0], size[1] * size[2] * size[3]);
    let bs = uniform(&[c_out], 1.0 / (fan_in as f64).sqrt(), &path);
    conv.bs = Some(path.var_copy("bias", &bs));
    conv
}
