//! libtorch's speed switches for CUDA, with torch's names and defaults: cuDNN's autotuner
//! (`torch.backends.cudnn.benchmark`, off by default), the float32 matrix-product precision
//! (`torch.set_float32_matmul_precision`, "highest" by default: no TF32) and cuDNN's TF32
//! convolutions (`torch.backends.cudnn.allow_tf32`, on by default). They are process-wide, as in
//! torch, and go through the C++ shim (`csrc/device_shim.cpp`); on the CPU they change nothing
//! but are kept (libtorch holds them as plain flags).
use std::ffi::CString;
use std::os::raw::c_int;
use std::str::FromStr;

use crate::shim::check_kernel as check;
use crate::shim::device::{
    tb_cudnn_allow_tf32, tb_float32_matmul_precision, tb_set_cudnn_allow_tf32,
    tb_set_cudnn_benchmark, tb_set_float32_matmul_precision,
};
use crate::{Error, Result};

/// `torch.backends.cudnn.benchmark = on`: for each new input shape cuDNN times its
/// convolution algorithms once and keeps the fastest (the first steps are slower, later ones
/// may be faster). It cannot be combined with the deterministic mode
/// ([`use_deterministic_algorithms`](super::use_deterministic_algorithms)), which needs it off:
/// asking for it then is an error naming both.
///
/// ```
/// use trainbook::train::{determinism, set_cudnn_benchmark};
/// set_cudnn_benchmark(true)?;
/// assert!(determinism()?.cudnn_benchmark);
/// set_cudnn_benchmark(false)?;
/// # Ok::<(), trainbook::Error>(())
/// ```
pub fn set_cudnn_benchmark(on: bool) -> Result<()> {
    if on && super::determinism()?.algorithms {
        return Err(Error::InvalidArgument(
            "cuDNN's benchmark (autotuning) cannot be on in the deterministic mode \
             (use_deterministic_algorithms(true)): the algorithms it picks by timing vary \
             between runs; ask for one of the two"
                .into(),
        ));
    }
    // SAFETY: a plain call; errors come back as an owned message.
    check("torch.backends.cudnn.benchmark", unsafe { tb_set_cudnn_benchmark(c_int::from(on)) })
}

/// The precision of float32 matrix products on CUDA, as `torch.set_float32_matmul_precision`
/// names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Float32MatmulPrecision {
    /// `"highest"` (torch's default): full float32.
    #[default]
    Highest,
    /// `"high"`: TF32 tensor cores (10-bit mantissa) where the GPU has them.
    High,
    /// `"medium"`: bfloat16 where libtorch chooses to.
    Medium,
}

impl Float32MatmulPrecision {
    /// torch's name: "highest", "high" or "medium".
    pub fn name(self) -> &'static str {
        match self {
            Float32MatmulPrecision::Highest => "highest",
            Float32MatmulPrecision::High => "high",
            Float32MatmulPrecision::Medium => "medium",
        }
    }
}

impl FromStr for Float32MatmulPrecision {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "highest" => Ok(Float32MatmulPrecision::Highest),
            "high" => Ok(Float32MatmulPrecision::High),
            "medium" => Ok(Float32MatmulPrecision::Medium),
            other => Err(Error::InvalidArgument(format!(
                "float32 matmul precision '{other}': expected highest, high or medium"
            ))),
        }
    }
}

/// `torch.set_float32_matmul_precision(p.name())`.
///
/// ```
/// use trainbook::train::{float32_matmul_precision, set_float32_matmul_precision};
/// use trainbook::train::Float32MatmulPrecision::{High, Highest};
/// set_float32_matmul_precision(High)?;
/// assert_eq!(float32_matmul_precision()?, High);
/// set_float32_matmul_precision(Highest)?;
/// # Ok::<(), trainbook::Error>(())
/// ```
pub fn set_float32_matmul_precision(p: Float32MatmulPrecision) -> Result<()> {
    let name = CString::new(p.name()).expect("no NUL in the names");
    // SAFETY: `name` outlives the call.
    check("torch.set_float32_matmul_precision", unsafe {
        tb_set_float32_matmul_precision(name.as_ptr())
    })
}

/// `torch.get_float32_matmul_precision()`.
pub fn float32_matmul_precision() -> Result<Float32MatmulPrecision> {
    let mut level = 0;
    // SAFETY: the out-pointer is valid for the call.
    check("torch.get_float32_matmul_precision", unsafe {
        tb_float32_matmul_precision(&mut level)
    })?;
    Ok(match level {
        0 => Float32MatmulPrecision::Highest,
        1 => Float32MatmulPrecision::High,
        _ => Float32MatmulPrecision::Medium,
    })
}

/// `torch.backends.cudnn.allow_tf32 = on`: cuDNN's float32 convolutions may use TF32 tensor
/// cores (on by default, as in torch).
pub fn set_cudnn_allow_tf32(on: bool) -> Result<()> {
    // SAFETY: a plain call.
    check("torch.backends.cudnn.allow_tf32", unsafe { tb_set_cudnn_allow_tf32(c_int::from(on)) })
}

/// `torch.backends.cudnn.allow_tf32`.
pub fn cudnn_allow_tf32() -> Result<bool> {
    let mut on = 0;
    // SAFETY: the out-pointer is valid for the call.
    check("torch.backends.cudnn.allow_tf32", unsafe { tb_cudnn_allow_tf32(&mut on) })?;
    Ok(on != 0)
}

/// TF32 on or off for both float32 matrix products and convolutions: what
/// `torch.backends.cuda.matmul.allow_tf32 = on` and `torch.backends.cudnn.allow_tf32 = on` do
/// (the examples' `--tf32`).
pub fn set_tf32(on: bool) -> Result<()> {
    set_float32_matmul_precision(if on {
        Float32MatmulPrecision::High
    } else {
        Float32MatmulPrecision::Highest
    })?;
    set_cudnn_allow_tf32(on)
}
