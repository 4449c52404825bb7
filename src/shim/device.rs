//! Raw declarations of the C API in `csrc/device_shim.h`: the current CUDA device and its UUID,
//! pinned host memory, the CUDA caching allocator's statistics, and the deterministic-algorithms
//! switches. The safe wrappers live where they are used; every one reads errors through
//! `crate::shim`.
use std::os::raw::{c_char, c_int, c_void};

extern "C" {
    pub(crate) fn tb_cuda_set_device(index: c_int) -> *mut c_char;
    pub(crate) fn tb_cuda_current_device(index: *mut c_int) -> *mut c_char;
    pub(crate) fn tb_pin_memory(t: *const c_void, out: *mut *mut c_void) -> *mut c_char;
    pub(crate) fn tb_cuda_device_uuid(index: c_int, uuid16: *mut u8) -> *mut c_char;
    pub(crate) fn tb_cuda_memory_peaks(
        index: c_int,
        allocated: *mut i64,
        reserved: *mut i64,
    ) -> *mut c_char;
    pub(crate) fn tb_cuda_reset_peak_memory(index: c_int) -> *mut c_char;
    pub(crate) fn tb_cuda_empty_cache(index: c_int) -> *mut c_char;

    pub(crate) fn tb_set_deterministic(on: c_int) -> *mut c_char;
    pub(crate) fn tb_set_cudnn_benchmark(on: c_int) -> *mut c_char;
    pub(crate) fn tb_set_float32_matmul_precision(name: *const c_char) -> *mut c_char;
    pub(crate) fn tb_float32_matmul_precision(level: *mut c_int) -> *mut c_char;
    pub(crate) fn tb_set_cudnn_allow_tf32(on: c_int) -> *mut c_char;
    pub(crate) fn tb_cudnn_allow_tf32(on: *mut c_int) -> *mut c_char;
    pub(crate) fn tb_set_anomaly(on: c_int) -> *mut c_char;
    pub(crate) fn tb_anomaly_enabled(on: *mut c_int) -> *mut c_char;
    pub(crate) fn tb_deterministic_state(
        algorithms: *mut c_int,
        cudnn_deterministic: *mut c_int,
        cudnn_benchmark: *mut c_int,
    ) -> *mut c_char;
}
