//! Linear and convolution layers whose parameters are registered in PyTorch's order, `weight`
//! then `bias` (tch's `nn::linear`/`nn::conv2d` register the bias first). The order matters
//! wherever parameters travel as a list: DDP checks and broadcasts them in that order, so a
//! trainbook rank and a PyTorch rank can only share a group if the lists agree. The random
//! initial values are drawn in tch's order, so a seeded model starts from the same weights as
//! with tch's layers.
use tch::nn::{self, ConvConfig, Init, LinearConfig};

/// `torch.nn.Linear(in_dim, out_dim)` under `path`, initialised as tch's `nn::linear`.
///
/// ```
/// use tch::nn::VarStore;
/// let vs = VarStore::new(tch::Device::Cpu);
/// let fc = trainbook::models::linear(&(vs.root() / "fc"), 512, 3);
/// assert_eq!(fc.ws.size(), [3, 512]);
/// ```
pub fn linear(path: &nn::Path, in_dim: i64, out_dim: i64) -> nn::Linear {
    let bound = 1.0 / (in_dim as f64).sqrt();
    let bias = nn::init::init(Init::Uniform { lo: -bound, up: bound }, &[out_dim], path.device());
    let ws = path.var("weight", &[out_dim, in_dim], LinearConfig::default().ws_init);
    let bs = Some(path.var_copy("bias", &bias));
    nn::Linear { ws, bs }
}

/// `torch.nn.Conv2d` under `path` with `config` (and a bias if `config.bias`), initialised as
/// tch's `nn::conv2d`.
pub fn conv2d(path: &nn::Path, c_in: i64, c_out: i64, k: i64, config: ConvConfig) -> nn::Conv2D {
    let bias = config.bias.then(|| nn::init::init(config.bs_init, &[c_out], path.device()));
    let mut conv = nn::conv2d(path, c_in, c_out, k, ConvConfig { bias: false, ..config });
    conv.bs = bias.map(|b| path.var_copy("bias", &b));
    conv
}
