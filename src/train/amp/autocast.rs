//! `torch.autocast` regions: libtorch's own autocast state for CPU and CUDA, which tch-rs does
//! not bind, entered and left through trainbook's C++ shim (`csrc/optim_amp_shim.cpp`).
use std::os::raw::c_int;

use tch::Kind;

use crate::shim::check_kernel as check;
use crate::shim::optim_amp::{tb_autocast_enter, tb_autocast_exit};
use crate::{Error, Result};

/// An active `torch.autocast(device_type, dtype)` region; dropping it leaves the region and
/// restores the state from before (nesting works as in torch).
pub(crate) struct AutocastGuard {
    device_type: c_int,
    prev_enabled: c_int,
    prev_dtype: c_int,
}

/// at::ScalarType codes of the two autocast dtypes.
fn scalar_type_code(kind: Kind) -> Result<c_int> {
    match kind {
        Kind::Half => Ok(5),
        Kind::BFloat16 => Ok(15),
        other => Err(Error::InvalidArgument(format!(
            "autocast runs in float16 or bfloat16, not {other:?}"
        ))),
    }
}

impl AutocastGuard {
    /// Enters autocast for `device` (CPU or CUDA) with the lower-precision `kind`.
    pub(crate) fn enter(device: tch::Device, kind: Kind) -> Result<AutocastGuard> {
        let device_type = match device {
            tch::Device::Cpu => 0,
            tch::Device::Cuda(_) => 1,
            other => {
                return Err(Error::InvalidArgument(format!(
                    "autocast supports CPU and CUDA devices, not {other:?}"
                )))
            }
        };
        let dtype = scalar_type_code(kind)?;
        let (mut prev_enabled, mut prev_dtype) = (0, 0);
        // SAFETY: plain values and two out-pointers to locals.
        check("autocast enter", unsafe {
            tb_autocast_enter(device_type, 1, dtype, &mut prev_enabled, &mut prev_dtype)
        })?;
        Ok(AutocastGuard { device_type, prev_enabled, prev_dtype })
    }
}

impl Drop for AutocastGuard {
    fn drop(&mut self) {
        // SAFETY: plain values. Restoring the saved state cannot fail for a device type that
        // `enter` accepted; an error here would only leave autocast as it was inside.
        let _ = check("autocast exit", unsafe {
            tb_autocast_exit(self.device_type, self.prev_enabled, self.prev_dtype)
        });
    }
}
