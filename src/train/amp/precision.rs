//! Mixed precision: [`Precision`] chooses whether the forward pass (and the loss) run under
//! autocast, with torch's semantics: `torch.autocast(device_type, dtype=torch.bfloat16)` or
//! `float16`, on CPU and CUDA alike (libtorch's own autocast, switched on through the shim).
//! Weights, gradients and optimizer state stay float32; float16 needs a
//! [`GradScaler`](super::GradScaler) to keep small gradients from flushing to zero.
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use tch::{Device, Kind};

use super::autocast::AutocastGuard;
use crate::{Error, Result};

/// The arithmetic of the forward pass.
///
/// ```
/// use trainbook::train::Precision;
/// let p: Precision = "bf16".parse().unwrap();
/// assert_eq!(p, Precision::Bf16);
/// assert_eq!(Precision::default(), Precision::F32);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Precision {
    /// Everything in float32 (no autocast).
    #[default]
    F32,
    /// Autocast to bfloat16: float32's range, 8 bits of mantissa; no loss scaling needed.
    Bf16,
    /// Autocast to float16: 11 bits of mantissa, a narrow range; train with a `GradScaler`.
    F16,
}

impl Precision {
    /// The autocast dtype (`None` for float32).
    pub fn autocast_kind(self) -> Option<Kind> {
        match self {
            Precision::F32 => None,
            Precision::Bf16 => Some(Kind::BFloat16),
            Precision::F16 => Some(Kind::Half),
        }
    }

    /// Runs `f` under autocast on `device` (directly for `F32`), as
    /// `with torch.autocast(device.type, dtype): f()`.
    pub fn run<T>(self, device: Device, f: impl FnOnce() -> T) -> Result<T> {
        let _guard = match self.autocast_kind() {
            Some(kind) => Some(AutocastGuard::enter(device, kind)?),
            None => None,
        };
        Ok(f())
    }
}

impl FromStr for Precision {
    type Err = Error;
    fn from_str(s: &str) -> Result<Precision> {
        match s.to_ascii_lowercase().as_str() {
            "f32" | "fp32" | "float32" => Ok(Precision::F32),
            "bf16" | "bfloat16" => Ok(Precision::Bf16),
            "f16" | "fp16" | "float16" | "half" => Ok(Precision::F16),
            other => Err(Error::InvalidArgument(format!(
                "precision {other:?}: expected f32, bf16 or f16"
            ))),
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Precision::F32 => "f32",
            Precision::Bf16 => "bf16",
            Precision::F16 => "f16",
        })
    }
}

#[cfg(test)]
mod tests {
    use tch::Tensor;

    use super::*;

    #[test]
    fn autocast_lowers_matmul_and_restores_the_state_after() {
        let a = Tensor::ones([2, 2], (Kind::Float, Device::Cpu));
        let inside = Precision::Bf16.run(Device::Cpu, || a.matmul(&a).kind()).unwrap();
        assert_eq!(inside, Kind::BFloat16);
        assert_eq!(a.matmul(&a).kind(), Kind::Float, "autocast is off again after the region");
        assert!("fp8".parse::<Precision>().unwrap_err().to_string().contains("fp8"));
        assert!(Precision::F16.run(Device::Mps, || ()).is_err());
    }
}
