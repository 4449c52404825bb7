//! The ground floor under everything that calls trainbook's C++ shim (`csrc/`): the shim's
//! error convention (a C function returns NULL on success, else an owned message), the owned
//! byte buffers it hands back, and the few queries every layer needs (the libtorch version it
//! was compiled against, whether NCCL is built in, the versions report, the thread's current
//! CUDA device). The raw `extern "C"` declarations are here too, one file per csrc header:
//! `c10d.rs` (c10d_shim.h: store, process groups, the Reducer, generators' state),
//! `cuda_graph.rs` (cuda_graph_shim.h), `device.rs` (device_shim.h), `optim_amp.rs` (optim_amp_shim.h), `profiler.rs` (profiler_shim.h), `script.rs` (script_shim.h), `sync_bn.rs`
//! (sync_bn_shim.h) and `torch_file.rs` (torch_file_shim.h); the safe wrappers stay where they are used, and all of them read errors
//! through this file.
pub(crate) mod c10d;
pub(crate) mod cuda_graph;
pub(crate) mod device;
pub(crate) mod optim_amp;
pub(crate) mod profiler;
pub(crate) mod script;
pub(crate) mod sync_bn;
pub(crate) mod torch_file;

use std::os::raw::{c_char, c_int, c_void};

use tch::Tensor;

use crate::{Error, Result};
use c10d::{tb_bytes_free, tb_has_nccl, tb_string_free, tb_torch_version};
use device::{tb_cuda_current_device, tb_cuda_device_uuid, tb_cuda_set_device, tb_pin_memory};

/// The shim's error convention (NULL = success, else an owned message): the message, if any,
/// freed here. Every C API of the shim (c10d and the optimizer/autocast kernels) uses it.
pub(crate) fn take_message(err: *mut c_char) -> Option<String> {
    if err.is_null() {
        return None;
    }
    // SAFETY: a non-null return is a NUL-terminated string malloc'ed by the shim; we free it once.
    Some(unsafe {
        let text = std::ffi::CStr::from_ptr(err).to_string_lossy().into_owned();
        tb_string_free(err);
        text
    })
}

/// Turns the shim's error convention into a `Result` for a c10d operation (or a generator
/// state, which the shim reaches through the same c10d-side code): [`Error::Dist`] naming `op`.
pub(crate) fn check(op: &str, err: *mut c_char) -> Result<()> {
    take_message(err).map_or(Ok(()), |message| Err(Error::Dist { op: op.to_string(), message }))
}

/// The same convention for libtorch's optimizer and autocast kernels: [`Error::Kernel`]
/// naming `op`.
pub(crate) fn check_kernel(op: &str, err: *mut c_char) -> Result<()> {
    take_message(err).map_or(Ok(()), |message| Err(Error::Kernel { op: op.to_string(), message }))
}

/// CUDA device `index`'s UUID (`torch.cuda.get_device_properties(index).uuid`): the same
/// physical GPU has the same UUID in every process, whatever `CUDA_VISIBLE_DEVICES` each sees.
/// Errors ([`Error::Dist`]) in a build without the `cuda` feature or without that device.
pub(crate) fn cuda_device_uuid(index: usize) -> Result<[u8; 16]> {
    let index = c_int::try_from(index)
        .map_err(|_| Error::InvalidArgument(format!("CUDA device index {index}")))?;
    let mut uuid = [0u8; 16];
    // SAFETY: `uuid` has the 16 bytes the shim writes.
    check(&format!("read the UUID of Cuda({index})"), unsafe {
        tb_cuda_device_uuid(index, uuid.as_mut_ptr())
    })?;
    Ok(uuid)
}

/// `tensor.pin_memory()`: a copy of the CPU tensor `t` in page-locked host memory, from which a
/// non-blocking copy to a GPU overlaps with compute. tch's `pin_memory(device)` passes the
/// device argument that torch 2.11 deprecates (a warning on every batch); this call passes
/// none. Errors ([`Error::Kernel`]) where there is no CUDA host allocator (no GPU).
pub(crate) fn pin_memory(t: &Tensor) -> Result<Tensor> {
    let mut out: *mut c_void = std::ptr::null_mut();
    // SAFETY: `t` is a live tensor; on success `out` is an owned at::Tensor* from the shim.
    check_kernel("pin_memory", unsafe { tb_pin_memory(t.as_ptr() as *const c_void, &mut out) })?;
    Ok(unsafe { Tensor::from_ptr(out as *mut torch_sys::C_tensor) })
}

/// The `at::Tensor*` behind each tensor, for a C API taking a list of tensors.
pub(crate) fn tensor_ptrs(tensors: &[&Tensor]) -> Vec<*const c_void> {
    tensors.iter().map(|t| t.as_ptr() as *const c_void).collect()
}

/// Copies `len` bytes the shim allocated at `ptr` and frees them.
///
/// # Safety
/// `ptr` must be a buffer of at least `len` bytes returned by the shim on success, not freed
/// before and not used after.
pub(crate) unsafe fn take_bytes(ptr: *mut u8, len: usize) -> Vec<u8> {
    let bytes = std::slice::from_raw_parts(ptr, len).to_vec();
    tb_bytes_free(ptr);
    bytes
}

/// Version of the libtorch the c10d shim was compiled against (e.g. "2.13.0").
pub fn torch_version() -> &'static str {
    // SAFETY: returns a pointer to a static NUL-terminated string inside the shim.
    unsafe { std::ffi::CStr::from_ptr(tb_torch_version()) }.to_str().unwrap_or("unknown")
}

/// Whether the shim was compiled with NCCL (the `cuda` cargo feature).
pub(crate) fn has_nccl() -> bool {
    // SAFETY: a plain query without arguments.
    unsafe { tb_has_nccl() != 0 }
}

/// `torch.cuda.set_device(index)` for the calling thread: CUDA device `index` becomes the
/// device of this thread's new CUDA contexts, handles and NCCL communicators. A rank calls it
/// before any CUDA work (each thread rank on its own thread: the current device is per
/// thread); without it every rank would open a context on GPU 0. Errors ([`Error::Dist`])
/// where CUDA is not usable (no driver, no such device, a build without libtorch_cuda).
pub(crate) fn set_cuda_device(index: usize) -> Result<()> {
    let index = c_int::try_from(index)
        .map_err(|_| Error::InvalidArgument(format!("CUDA device index {index}")))?;
    // SAFETY: a plain call; errors come back as an owned message.
    check(&format!("set the current CUDA device to Cuda({index})"), unsafe {
        tb_cuda_set_device(index)
    })
}

/// `torch.cuda.current_device()`: the calling thread's current CUDA device (each rank's is
/// its own after [`Dist::init`](crate::dist::Dist::init) or in a `spawn`ed rank). Errors
/// ([`Error::Dist`]) where CUDA is not usable.
pub fn current_cuda_device() -> Result<usize> {
    let mut index: c_int = -1;
    // SAFETY: the out-pointer is valid for the call.
    check("read the current CUDA device", unsafe { tb_cuda_current_device(&mut index) })?;
    Ok(index.max(0) as usize)
}

/// Versions of the pieces a trainbook program runs on, for set-up checks and bug reports.
#[derive(Clone, Debug)]
pub struct Versions {
    /// This crate's version.
    pub trainbook: &'static str,
    /// The libtorch headers trainbook's c10d shim was compiled against.
    pub libtorch: &'static str,
    /// Directory of the libtorch shared libraries the binaries were linked with.
    pub libtorch_lib_dir: &'static str,
    /// Whether libtorch sees a usable CUDA device now.
    pub cuda_available: bool,
    /// How many CUDA devices libtorch sees.
    pub cuda_devices: i64,
    /// Whether the shim was built with NCCL (`--features cuda`).
    pub nccl_built_in: bool,
}

/// Reports the versions this build runs on (and whether CUDA is usable right now).
///
/// ```
/// let v = trainbook::versions();
/// assert_eq!(v.trainbook, env!("CARGO_PKG_VERSION"));
/// assert!(v.to_string().starts_with("trainbook "));
/// ```
pub fn versions() -> Versions {
    Versions {
        trainbook: env!("CARGO_PKG_VERSION"),
        libtorch: torch_version(),
        libtorch_lib_dir: env!("TRAINBOOK_LIBTORCH_LIB"),
        cuda_available: tch::Cuda::is_available(),
        cuda_devices: tch::Cuda::device_count(),
        nccl_built_in: has_nccl(),
    }
}

impl std::fmt::Display for Versions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "trainbook {}", self.trainbook)?;
        writeln!(f, "libtorch  {} ({})", self.libtorch, self.libtorch_lib_dir)?;
        writeln!(f, "CUDA      available={} devices={}", self.cuda_available, self.cuda_devices)?;
        write!(f, "NCCL      built in={}", self.nccl_built_in)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_null_error_is_success_and_versions_name_libtorch() {
        assert_eq!(take_message(std::ptr::null_mut()), None);
        assert!(check("nothing", std::ptr::null_mut()).is_ok());
        assert_eq!(versions().libtorch, torch_version());
        assert!(torch_version().chars().next().is_some_and(|c| c.is_ascii_digit()));
    }

    #[test]
    fn setting_the_cuda_device_fails_clearly_without_cuda() {
        if tch::Cuda::is_available() {
            set_cuda_device(0).unwrap();
            assert_eq!(current_cuda_device().unwrap(), 0);
            return;
        }
        // A CPU machine (or a build without libtorch_cuda): libtorch's error, naming the device.
        let err = set_cuda_device(0).unwrap_err().to_string();
        assert!(err.contains("Cuda(0)"), "{err}");
        assert!(current_cuda_device().is_err());
    }
}
