//! torchvision's Vision Transformers (ViT-B/16, B/32, L/16, L/32, H/14), with its parameter
//! names and order: the image cut into patches by one strided convolution (`conv_proj`), a
//! class token, learned position embeddings, encoder blocks of pre-norm multi-head
//! self-attention and a GELU MLP (LayerNorm eps 1e-6), a last LayerNorm, and a linear head on
//! the class token. The attention is `torch.nn.MultiheadAttention`'s, step for step: in
//! training or with gradients its Python path (one packed input projection, libtorch's
//! `scaled_dot_product_attention`, the output projection), in evaluation without gradients the
//! fused kernel its fast path calls (`_native_multi_head_attention`), so either way the same
//! kernels run as in PyTorch.
use tch::nn::{self, ModuleT};
use tch::{Kind, Tensor};

use crate::{Error, Result};

/// The names [`vit`] builds.
pub const VIT_NAMES: [&str; 5] = ["vit_b_16", "vit_b_32", "vit_l_16", "vit_l_32", "vit_h_14"];

/// torchvision's LayerNorm in the Vision Transformers: eps 1e-6.
const EPS: f64 = 1e-6;

/// Each model's patch size, layers, heads, hidden width and MLP width.
fn size(name: &str) -> Option<(i64, i64, i64, i64, i64)> {
    Some(match name {
        "vit_b_16" => (16, 12, 12, 768, 3072),
        "vit_b_32" => (32, 12, 12, 768, 3072),
        "vit_l_16" => (16, 24, 16, 1024, 4096),
        "vit_l_32" => (32, 24, 16, 1024, 4096),
        "vit_h_14" => (14, 32, 16, 1280, 5120),
        _ => return None,
    })
}

/// A LayerNorm's weight (1) and bias (0) under `p`.
#[derive(Debug)]
struct LayerNorm {
    weight: Tensor,
    bias: Tensor,
}

impl LayerNorm {
    fn new(p: nn::Path, width: i64) -> LayerNorm {
        let weight = p.var("weight", &[width], nn::Init::Const(1.0));
        LayerNorm { weight, bias: p.var("bias", &[width], nn::Init::Const(0.0)) }
    }

    fn forward(&self, xs: &Tensor) -> Tensor {
        xs.layer_norm([self.weight.size()[0]], Some(&self.weight), Some(&self.bias), EPS, true)
    }
}

/// `nn.init.xavier_uniform_` of a `[fan_out, fan_in]` weight: uniform within
/// `sqrt(6 / (fan_in + fan_out))`.
fn xavier_uniform(rows: i64, cols: i64) -> nn::Init {
    let bound = (6.0 / (rows + cols) as f64).sqrt();
    nn::Init::Uniform { lo: -bound, up: bound }
}

/// A linear layer's weight and bias under `p` (weight first, as torch registers them).
fn linear(p: nn::Path, (c_in, c_out): (i64, i64), ws: nn::Init, bs: nn::Init) -> nn::Linear {
    let ws = p.var("weight", &[c_out, c_in], ws);
    nn::Linear { ws, bs: Some(p.var("bias", &[c_out], bs)) }
}

/// `torch.nn.MultiheadAttention(width, heads, batch_first=True)` over one sequence, attending
/// to itself, without masks or attention dropout (the Vision Transformers' use).
#[derive(Debug)]
struct SelfAttention {
    heads: i64,
    in_proj_weight: Tensor,
    in_proj_bias: Tensor,
    out_proj: nn::Linear,
}

impl SelfAttention {
    fn new(p: nn::Path, width: i64, heads: i64) -> SelfAttention {
        let in_proj_weight =
            p.var("in_proj_weight", &[3 * width, width], xavier_uniform(3 * width, width));
        let in_proj_bias = p.var("in_proj_bias", &[3 * width], nn::Init::Const(0.0));
        // The output projection keeps `nn.Linear`'s default weight (uniform within
        // 1/sqrt(width)); its bias is set to 0.
        let bound = 1.0 / (width as f64).sqrt();
        let ws = nn::Init::Uniform { lo: -bound, up: bound };
        let out_proj = linear(&p / "out_proj", (width, width), ws, nn::Init::Const(0.0));
        SelfAttention { heads, in_proj_weight, in_proj_bias, out_proj }
    }

    /// Whether PyTorch's `MultiheadAttention.forward` takes its fast path here: evaluation
    /// mode, an even number of heads, and no gradient to record (grad mode off, or neither the
    /// input nor a projection requires one).
    fn fast_path(&self, xs: &Tensor, train: bool) -> bool {
        let any_grad = [xs, &self.in_proj_weight, &self.in_proj_bias]
            .into_iter()
            .chain([&self.out_proj.ws, self.out_proj.bs.as_ref().unwrap_or(&self.out_proj.ws)])
            .any(Tensor::requires_grad);
        !train && self.heads % 2 == 0 && !(grad_enabled() && any_grad)
    }

    /// `[B, L, E]` to `[B, L, E]`.
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let bias = self.out_proj.bs.as_ref().expect("the output projection has a bias");
        if self.fast_path(xs, train) {
            let (width, none) = (self.in_proj_weight.size()[1], None::<Tensor>);
            let (out, _) = Tensor::internal_native_multi_head_attention(
                xs,
                xs,
                xs,
                width,
                self.heads,
                &self.in_proj_weight,
                &self.in_proj_bias,
                &self.out_proj.ws,
                bias,
                none,
                false,
                true,
                None,
            );
            return out;
        }
        // F.multi_head_attention_forward with batch_first: sequence first, one packed
        // projection split into q, k and v, heads folded into the batch.
        let x = xs.transpose(1, 0);
        let (l, b, e) = (x.size()[0], x.size()[1], x.size()[2]);
        let d = e / self.heads;
        let proj = x.linear(&self.in_proj_weight, Some(&self.in_proj_bias));
        let proj = proj.unflatten(-1, [3, e]).unsqueeze(0).transpose(0, -2).squeeze_dim(-2);
        let proj = proj.contiguous();
        let split = |i: i64| {
            proj.get(i).view([l, b * self.heads, d]).transpose(0, 1).view([b, self.heads, l, d])
        };
        let (q, k, v) = (split(0), split(1), split(2));
        let none = None::<Tensor>;
        let out = Tensor::scaled_dot_product_attention(&q, &k, &v, none, 0.0, false, None, false);
        let out = out.permute([2, 0, 1, 3]).reshape([b * l, e]);
        let out = out.linear(&self.out_proj.ws, Some(bias)).view([l, b, e]);
        out.transpose(1, 0)
    }
}

/// Whether autograd records operations now (`torch.is_grad_enabled()`).
fn grad_enabled() -> bool {
    let probe = Tensor::zeros([1], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
    (&probe * 1.0).requires_grad()
}

/// torchvision's `EncoderBlock`.
#[derive(Debug)]
struct EncoderBlock {
    ln_1: LayerNorm,
    attention: SelfAttention,
    ln_2: LayerNorm,
    fc1: nn::Linear,
    fc2: nn::Linear,
    dropout: f64,
}

impl EncoderBlock {
    fn new(p: &nn::Path, (heads, width, mlp): (i64, i64, i64), dropout: f64) -> EncoderBlock {
        let ln_1 = LayerNorm::new(p / "ln_1", width);
        let attention = SelfAttention::new(p / "self_attention", width, heads);
        let ln_2 = LayerNorm::new(p / "ln_2", width);
        let bias = nn::Init::Randn { mean: 0.0, stdev: 1e-6 };
        let fc1 = linear(p / "mlp" / 0, (width, mlp), xavier_uniform(mlp, width), bias);
        let fc2 = linear(p / "mlp" / 3, (mlp, width), xavier_uniform(width, mlp), bias);
        EncoderBlock { ln_1, attention, ln_2, fc1, fc2, dropout }
    }

    fn forward_t(&self, input: &Tensor, train: bool) -> Tensor {
        let x = self.attention.forward_t(&self.ln_1.forward(input), train);
        let x = x.dropout(self.dropout, train) + input;
        let y = self.ln_2.forward(&x).apply(&self.fc1).gelu("none").dropout(self.dropout, train);
        let y = y.apply(&self.fc2).dropout(self.dropout, train);
        x + y
    }
}

/// torchvision's Vision Transformer, built by [`vit`].
#[derive(Debug)]
pub struct VisionTransformer {
    patch: i64,
    image_size: i64,
    class_token: Tensor,
    conv_proj: nn::Conv2D,
    pos_embedding: Tensor,
    layers: Vec<EncoderBlock>,
    ln: LayerNorm,
    head: nn::Linear,
    dropout: f64,
}

impl VisionTransformer {
    /// The side of the square images the network takes (its position embeddings fit that
    /// many patches).
    pub fn image_size(&self) -> i64 {
        self.image_size
    }
}

/// The shape of a Vision Transformer: torchvision's `VisionTransformer(image_size,
/// patch_size, num_layers, num_heads, hidden_dim, mlp_dim)` (dropout 0, LayerNorm eps 1e-6,
/// no representation layer, the patch convolution as stem).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VitConfig {
    /// The side of the square images it takes (a multiple of `patch_size`).
    pub image_size: i64,
    /// The side of a patch (the stride of `conv_proj`).
    pub patch_size: i64,
    /// Encoder blocks.
    pub num_layers: i64,
    /// Attention heads (dividing `hidden_dim`).
    pub num_heads: i64,
    /// The width of the tokens.
    pub hidden_dim: i64,
    /// The width of each block's MLP.
    pub mlp_dim: i64,
}

impl VitConfig {
    /// torchvision's `name` (one of [`VIT_NAMES`]) for images of `image_size`. Errors:
    /// another name.
    pub fn of(name: &str, image_size: i64) -> Result<VitConfig> {
        let (patch_size, num_layers, num_heads, hidden_dim, mlp_dim) =
            size(name).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "model {name:?}: the Vision Transformers are {}",
                    VIT_NAMES.join(", ")
                ))
            })?;
        Ok(VitConfig { image_size, patch_size, num_layers, num_heads, hidden_dim, mlp_dim })
    }
}

/// torchvision's `vit_b_16(num_classes=classes, image_size=image_size)` ... `vit_h_14` under
/// `path` (`name` one of [`VIT_NAMES`]; torchvision's default image size is 224, and its
/// ImageNet weights were trained at 224, or 518 for H/14's): [`vision_transformer`] of
/// [`VitConfig::of`]`(name, image_size)`. Errors: another name, or an image size that is not a
/// multiple of the patch size.
///
/// ```
/// # fn main() -> trainbook::Result<()> {
/// use tch::nn::{ModuleT, VarStore};
/// use tch::{Device, Kind, Tensor};
/// use trainbook::models::vit;
/// let vs = VarStore::new(Device::Cpu);
/// let model = vit(&vs.root(), "vit_b_32", 10, 64)?;
/// let images = Tensor::zeros([2, 3, 64, 64], (Kind::Float, Device::Cpu));
/// assert_eq!(model.forward_t(&images, false).size(), [2, 10]);
/// # Ok(()) }
/// ```
pub fn vit(
    path: &nn::Path,
    name: &str,
    classes: i64,
    image_size: i64,
) -> Result<VisionTransformer> {
    vision_transformer(path, &VitConfig::of(name, image_size)?, classes)
}

/// torchvision's `VisionTransformer` of `config` with `classes` outputs under `path`: its
/// names (`class_token`, `conv_proj`, `encoder.pos_embedding`,
/// `encoder.layers.encoder_layer_<i>.{ln_1, self_attention, ln_2, mlp.0, mlp.3}`,
/// `encoder.ln`, `heads.head`), parameter order, dropout 0 and initialisation: the patch
/// convolution normal with std `sqrt(1 / fan_in)` (torchvision's truncation at +-2 lies beyond
/// 50 standard deviations for every size it builds) and bias 0, the class token 0, the position
/// embeddings normal with std 0.02, the attention's input projection Xavier-uniform and bias 0,
/// its output projection `nn.Linear`'s default and bias 0, the MLP Xavier-uniform with biases
/// normal (std 1e-6), LayerNorms 1 and 0, the head 0 (the same distributions, not the same
/// draws). The network takes `[N, 3, image_size, image_size]` images. Errors: an image size
/// that is not a positive multiple of the patch size, or heads that do not divide the width.
pub fn vision_transformer(
    path: &nn::Path,
    config: &VitConfig,
    classes: i64,
) -> Result<VisionTransformer> {
    let VitConfig { image_size, patch_size: patch, num_layers, num_heads, hidden_dim, mlp_dim } =
        *config;
    if patch <= 0 || image_size <= 0 || image_size % patch != 0 {
        return Err(Error::InvalidArgument(format!(
            "vision transformer: image size {image_size} is not a positive multiple of its \
             patch size {patch}"
        )));
    }
    if num_heads <= 0 || hidden_dim % num_heads != 0 {
        return Err(Error::InvalidArgument(format!(
            "vision transformer: {num_heads} heads do not divide the width {hidden_dim}"
        )));
    }
    let width = hidden_dim;
    let class_token = path.var("class_token", &[1, 1, width], nn::Init::Const(0.0));
    let fan_in = 3 * patch * patch;
    let ws_init = nn::Init::Randn { mean: 0.0, stdev: (1.0 / fan_in as f64).sqrt() };
    let conv = nn::ConvConfig { stride: patch, bias: false, ws_init, ..Default::default() };
    let mut conv_proj = nn::conv2d(path / "conv_proj", 3, width, patch, conv);
    conv_proj.bs = Some((path / "conv_proj").var("bias", &[width], nn::Init::Const(0.0)));
    let encoder = path / "encoder";
    let seq = (image_size / patch) * (image_size / patch) + 1;
    let pos_init = nn::Init::Randn { mean: 0.0, stdev: 0.02 };
    let pos_embedding = encoder.var("pos_embedding", &[1, seq, width], pos_init);
    let blocks = &encoder / "layers";
    let layers = (0..num_layers)
        .map(|i| {
            let p = &blocks / format!("encoder_layer_{i}");
            EncoderBlock::new(&p, (num_heads, width, mlp_dim), 0.0)
        })
        .collect();
    let ln = LayerNorm::new(&encoder / "ln", width);
    let zero = nn::Init::Const(0.0);
    let head = linear(path / "heads" / "head", (width, classes), zero, zero);
    Ok(VisionTransformer {
        patch,
        image_size,
        class_token,
        conv_proj,
        pos_embedding,
        layers,
        ln,
        head,
        dropout: 0.0,
    })
}

impl ModuleT for VisionTransformer {
    /// torchvision's `forward`: patches, the class token first, the position embeddings, the
    /// encoder, the head on the class token.
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let (n, side) = (xs.size()[0], self.image_size / self.patch);
        let width = self.pos_embedding.size()[2];
        let x = xs.apply(&self.conv_proj).reshape([n, width, side * side]).permute([0, 2, 1]);
        let x = Tensor::cat(&[self.class_token.expand([n, -1, -1], false), x], 1);
        let mut x = (x + &self.pos_embedding).dropout(self.dropout, train);
        for layer in &self.layers {
            x = layer.forward_t(&x, train);
        }
        self.ln.forward(&x).select(1, 0).apply(&self.head)
    }
}
