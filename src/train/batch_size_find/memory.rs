//! A trial's peak memory: on a GPU the caching allocator's peak reserved bytes
//! (`torch.cuda.max_memory_reserved`, its peak reset before the trial and its unused cache given
//! back), on the CPU the process's peak resident set (`VmHWM` in `/proc/self/status`, reset
//! before the trial by writing 5 to `/proc/self/clear_refs`, Linux 4.0 and later, after the C
//! allocator has handed its free pages back with glibc's `malloc_trim`, so that memory freed by
//! an earlier trial and still resident is not counted again).
use tch::Device;

use crate::{cuda, Error, Result};

/// Measures trials' peaks on one device.
pub(crate) struct PeakMemory {
    device: Device,
}

impl PeakMemory {
    /// A meter for `device` (its peak reset once, which checks that it can be).
    pub fn new(device: Device) -> Result<PeakMemory> {
        let meter = PeakMemory { device };
        meter.reset()?;
        Ok(meter)
    }

    /// Resets the peak; the bytes held now.
    pub fn reset(&self) -> Result<u64> {
        match self.device {
            Device::Cuda(_) => {
                cuda::empty_cache(self.device)?;
                cuda::reset_peak_memory_stats(self.device)?;
                Ok(cuda::max_memory(self.device)?.1)
            }
            _ => {
                #[cfg(all(target_os = "linux", target_env = "gnu"))]
                // SAFETY: a plain call into glibc; it only returns free memory to the system.
                unsafe {
                    libc::malloc_trim(0);
                }
                std::fs::write("/proc/self/clear_refs", "5").map_err(|e| {
                    Error::InvalidArgument(format!(
                        "find_batch_size: cannot reset the process's peak memory \
                         (/proc/self/clear_refs: {e}); a memory limit on the CPU needs Linux 4.0 \
                         or later"
                    ))
                })?;
                resident_kib("VmHWM").map(|kib| kib * 1024)
            }
        }
    }

    /// The peak since the last [`reset`](Self::reset), in bytes.
    pub fn peak(&self) -> Result<u64> {
        match self.device {
            Device::Cuda(_) => Ok(cuda::max_memory(self.device)?.1),
            _ => Ok(resident_kib("VmHWM")? * 1024),
        }
    }
}

/// A `kB` line of `/proc/self/status` (`VmHWM`, `VmRSS`).
fn resident_kib(field: &str) -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| Error::InvalidArgument(format!("/proc/self/status: {e}")))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| Error::InvalidArgument(format!("/proc/self/status has no {field} line")))
}
