//! Raw declarations of the C API in `csrc/profiler_shim.h`: libtorch's profiler (Kineto, the
//! Chrome trace; NVTX ranges) and `at::RecordFunction` ranges. The safe wrapper is
//! `crate::train::profile`; errors are read through `crate::shim`.
use std::os::raw::{c_char, c_int};

/// torch.profiler.profile's activity and recording flags (`tb_profile_config`).
#[repr(C)]
pub(crate) struct TbProfileConfig {
    pub(crate) cuda: c_int,
    pub(crate) record_shapes: c_int,
    pub(crate) profile_memory: c_int,
    pub(crate) with_flops: c_int,
}

/// An opaque open range (`tb_record_function`).
#[repr(C)]
pub(crate) struct TbRecordFunction {
    _private: [u8; 0],
}

extern "C" {
    pub(crate) fn tb_profiler_prepare(config: *const TbProfileConfig) -> *mut c_char;
    pub(crate) fn tb_profiler_enable(config: *const TbProfileConfig) -> *mut c_char;
    pub(crate) fn tb_profiler_disable(path: *const c_char) -> *mut c_char;
    pub(crate) fn tb_profiler_enabled() -> c_int;
    pub(crate) fn tb_profiler_nvtx_enable() -> *mut c_char;
    pub(crate) fn tb_profiler_nvtx_disable() -> *mut c_char;
    pub(crate) fn tb_record_function_begin(
        name: *const c_char,
        out: *mut *mut TbRecordFunction,
    ) -> *mut c_char;
    pub(crate) fn tb_record_function_end(range: *mut TbRecordFunction);
}
