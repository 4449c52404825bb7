//! Autograd's anomaly detection (`torch.autograd.set_detect_anomaly`), through the C++ shim
//! (`csrc/device_shim.cpp`): while it is on, the backward pass checks what every backward
//! function returns and stops at the first NaN with libtorch's own message naming the
//! function, e.g. `Function 'LogSoftmaxBackward0' returned nan values in its 0th output.`
//! It slows the backward pass (a check and a device read per function), as in PyTorch.
use std::os::raw::c_int;

use crate::shim::check_kernel as check;
use crate::shim::device::{tb_anomaly_enabled, tb_set_anomaly};
use crate::Result;

/// Turns anomaly detection on or off for the whole process (torch's
/// `torch.autograd.set_detect_anomaly(on)`; a process-wide switch, as in PyTorch).
///
/// ```
/// use trainbook::train::{is_anomaly_enabled, set_detect_anomaly};
/// set_detect_anomaly(true)?;
/// assert!(is_anomaly_enabled()?);
/// set_detect_anomaly(false)?;
/// # Ok::<(), trainbook::Error>(())
/// ```
pub fn set_detect_anomaly(on: bool) -> Result<()> {
    // SAFETY: a plain call; errors come back as an owned message.
    check("set_detect_anomaly", unsafe { tb_set_anomaly(c_int::from(on)) })
}

/// Whether anomaly detection is on (`torch.is_anomaly_enabled()`).
pub fn is_anomaly_enabled() -> Result<bool> {
    let mut on = 0;
    // SAFETY: the out-pointer is valid for the call.
    check("is_anomaly_enabled", unsafe { tb_anomaly_enabled(&mut on) })?;
    Ok(on != 0)
}

/// `error` as [`Error::Anomaly`](crate::Error::Anomaly) of `epoch` (from 1) when it is the
/// anomaly check's ("Function '...' returned nan values ..."), else `error` itself.
pub(crate) fn named(error: crate::Error, epoch: u64) -> crate::Error {
    let text = error.to_string();
    match text.find("Function '").filter(|_| text.contains("returned nan values")) {
        Some(at) => {
            let message = text[at..].lines().next().unwrap_or_default().trim().to_string();
            crate::Error::Anomaly { epoch, message }
        }
        None => error,
    }
}

/// Anomaly detection on until dropped, then back as it was (torch's `detect_anomaly()`
/// context manager).
pub(crate) struct AnomalyGuard(bool);

impl AnomalyGuard {
    pub fn enable() -> Result<AnomalyGuard> {
        let before = is_anomaly_enabled()?;
        set_detect_anomaly(true)?;
        Ok(AnomalyGuard(before))
    }
}

impl Drop for AnomalyGuard {
    fn drop(&mut self) {
        let _ = set_detect_anomaly(self.0);
    }
}
