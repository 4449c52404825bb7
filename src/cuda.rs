//! CUDA's caching allocator as `torch.cuda` reports it: the peak of allocated and reserved
//! bytes on a GPU, and resetting them (`torch.cuda.max_memory_allocated`,
//! `torch.cuda.max_memory_reserved`, `torch.cuda.reset_peak_memory_stats`), and giving the
//! cache back (`torch.cuda.empty_cache`). The GPU benchmark
//! (benches/gpu.rs) compares these with PyTorch's on the same GPU. Every call dispatches at
//! run time to the allocator libtorch_cuda registers, so it compiles in every build and is an
//! error naming CUDA where there is none.
use std::os::raw::c_int;

use tch::Device;

use crate::shim::check_kernel;
use crate::shim::device::{tb_cuda_empty_cache, tb_cuda_memory_peaks, tb_cuda_reset_peak_memory};
use crate::{Error, Result};

fn cuda_index(device: Device) -> Result<c_int> {
    match device {
        Device::Cuda(i) => {
            c_int::try_from(i).map_err(|_| Error::InvalidArgument(format!("CUDA device index {i}")))
        }
        other => Err(Error::InvalidArgument(format!(
            "{other:?} has no CUDA caching allocator (memory statistics are for Cuda(_) devices)"
        ))),
    }
}

/// Peak bytes of the caching allocator on `device`: (allocated to tensors, reserved from the
/// driver) since the process started or [`reset_peak_memory_stats`], as
/// `torch.cuda.max_memory_allocated` and `torch.cuda.max_memory_reserved` report them.
///
/// ```
/// // Without a GPU it is an error naming the device.
/// # if !tch::Cuda::is_available() {
/// let err = trainbook::cuda::max_memory(tch::Device::Cpu).unwrap_err();
/// assert!(err.to_string().contains("Cpu"));
/// # }
/// ```
pub fn max_memory(device: Device) -> Result<(u64, u64)> {
    let index = cuda_index(device)?;
    let (mut allocated, mut reserved) = (0i64, 0i64);
    // SAFETY: the out-pointers are valid for the call; errors come back as an owned message.
    check_kernel(&format!("memory statistics of {device:?}"), unsafe {
        tb_cuda_memory_peaks(index, &mut allocated, &mut reserved)
    })?;
    Ok((allocated.max(0) as u64, reserved.max(0) as u64))
}

/// `torch.cuda.reset_peak_memory_stats(device)`: the peaks start again from the current usage.
pub fn reset_peak_memory_stats(device: Device) -> Result<()> {
    let index = cuda_index(device)?;
    // SAFETY: a plain call; errors come back as an owned message.
    check_kernel(&format!("reset the memory peaks of {device:?}"), unsafe {
        tb_cuda_reset_peak_memory(index)
    })
}

/// `torch.cuda.empty_cache()` on `device`: the caching allocator hands its unused cached blocks
/// back to the driver, so the memory reserved afterwards is what live tensors hold (a
/// benchmark that measures several configurations in one process calls it between them, as a
/// new process would start).
pub fn empty_cache(device: Device) -> Result<()> {
    let index = cuda_index(device)?;
    // SAFETY: a plain call; errors come back as an owned message.
    check_kernel(&format!("empty the CUDA cache of {device:?}"), unsafe {
        tb_cuda_empty_cache(index)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_gpu_the_statistics_are_errors_naming_the_device() {
        let cpu = max_memory(Device::Cpu).unwrap_err().to_string();
        assert!(empty_cache(Device::Cpu).unwrap_err().to_string().contains("Cpu"));
        assert!(cpu.contains("Cpu") && cpu.contains("caching allocator"), "{cpu}");
        if !tch::Cuda::is_available() {
            let gpu = max_memory(Device::Cuda(0)).unwrap_err().to_string();
            assert!(gpu.contains("Cuda(0)"), "{gpu}");
            assert!(reset_peak_memory_stats(Device::Cuda(0)).is_err());
            assert!(empty_cache(Device::Cuda(0)).is_err());
        }
    }
}
