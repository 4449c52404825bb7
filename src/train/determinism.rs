//! A deterministic mode for runs that must repeat bit for bit on a GPU (an exact resume, a
//! comparison of two runs): `torch.use_deterministic_algorithms(True)` with cuDNN's
//! deterministic algorithms, its benchmark off, and the cuBLAS workspace setting that torch
//! asks for, through the C++ shim (`csrc/device_shim.cpp`). On the CPU libtorch's kernels are
//! deterministic already; the switches are the same.
use std::os::raw::c_int;

use crate::shim::check_kernel as check;
use crate::shim::device::{tb_deterministic_state, tb_set_deterministic};
use crate::Result;

/// The cuBLAS workspace configuration torch requires for deterministic matrix products
/// (`CUBLAS_WORKSPACE_CONFIG`; `:16:8` would do too, with less memory and less speed).
pub const CUBLAS_WORKSPACE_CONFIG: &str = ":4096:8";

/// libtorch's determinism switches, as read back by [`determinism`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Determinism {
    /// `torch.are_deterministic_algorithms_enabled()`.
    pub algorithms: bool,
    /// `torch.backends.cudnn.deterministic`.
    pub cudnn_deterministic: bool,
    /// `torch.backends.cudnn.benchmark`.
    pub cudnn_benchmark: bool,
}

/// Turns the deterministic mode on or off for the whole process. On: what
/// `torch.use_deterministic_algorithms(True)`, `torch.backends.cudnn.deterministic = True` and
/// `torch.backends.cudnn.benchmark = False` do, and `CUBLAS_WORKSPACE_CONFIG` set to
/// [`CUBLAS_WORKSPACE_CONFIG`] when it is unset (torch refuses deterministic cuBLAS products
/// without it). Call it first, before any CUDA work: cuBLAS reads the variable when a thread
/// creates its handle. An operation without a deterministic implementation on the device
/// then fails with libtorch's error naming it (see torch's list). Off: both deterministic
/// switches off (cuDNN's benchmark stays off, as torch's default).
///
/// ```
/// use trainbook::train::{determinism, use_deterministic_algorithms};
/// use_deterministic_algorithms(true)?;
/// assert!(determinism()?.algorithms && !determinism()?.cudnn_benchmark);
/// use_deterministic_algorithms(false)?;
/// # Ok::<(), trainbook::Error>(())
/// ```
pub fn use_deterministic_algorithms(on: bool) -> Result<()> {
    if on && std::env::var_os("CUBLAS_WORKSPACE_CONFIG").is_none() {
        std::env::set_var("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE_CONFIG);
    }
    // SAFETY: a plain call; errors come back as an owned message.
    check("use_deterministic_algorithms", unsafe { tb_set_deterministic(c_int::from(on)) })
}

/// The determinism switches as libtorch holds them now.
pub fn determinism() -> Result<Determinism> {
    let (mut algorithms, mut cudnn_deterministic, mut cudnn_benchmark) = (0, 0, 0);
    // SAFETY: the out-pointers are valid for the call.
    check("read the determinism switches", unsafe {
        tb_deterministic_state(&mut algorithms, &mut cudnn_deterministic, &mut cudnn_benchmark)
    })?;
    Ok(Determinism {
        algorithms: algorithms != 0,
        cudnn_deterministic: cudnn_deterministic != 0,
        cudnn_benchmark: cudnn_benchmark != 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_switches_round_trip_through_libtorch() {
        let before = determinism().unwrap();
        use_deterministic_algorithms(true).unwrap();
        let on = determinism().unwrap();
        use_deterministic_algorithms(false).unwrap();
        let off = determinism().unwrap();
        let expected = |d: bool, b: bool| Determinism {
            algorithms: d,
            cudnn_deterministic: d,
            cudnn_benchmark: b,
        };
        assert_eq!(on, expected(true, false));
        assert_eq!(off, expected(false, false));
        assert!(std::env::var("CUBLAS_WORKSPACE_CONFIG").is_ok_and(|v| !v.is_empty()));
        assert!(!before.algorithms, "off by default, as in torch");
    }
}
