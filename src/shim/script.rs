//! Raw declarations of the C API in `csrc/script_shim.h`: TorchScript modules
//! (`torch::jit::Module`). The safe wrapper is `crate::models::ScriptModule`; errors are read
//! through `crate::shim`.
use std::os::raw::{c_char, c_int, c_void};

/// An opaque loaded module (`tb_script`).
#[repr(C)]
pub(crate) struct TbScript {
    _private: [u8; 0],
}

/// What `tb_script_named_tensors` calls for each tensor: (context, name, owned at::Tensor*).
pub(crate) type EachTensor = unsafe extern "C" fn(*mut c_void, *const c_char, *mut c_void);

extern "C" {
    pub(crate) fn tb_script_load(
        path: *const c_char,
        device_type: c_int,
        device_index: c_int,
        out: *mut *mut TbScript,
    ) -> *mut c_char;
    pub(crate) fn tb_script_free(m: *mut TbScript);
    pub(crate) fn tb_script_named_tensors(
        m: *const TbScript,
        buffers: c_int,
        ctx: *mut c_void,
        each: EachTensor,
    ) -> *mut c_char;
    pub(crate) fn tb_script_train(m: *mut TbScript, on: c_int) -> *mut c_char;
    pub(crate) fn tb_script_forward(
        m: *mut TbScript,
        inputs: *const *const c_void,
        n: usize,
        out: *mut *mut c_void,
    ) -> *mut c_char;
    pub(crate) fn tb_script_save(m: *const TbScript, path: *const c_char) -> *mut c_char;
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn tb_script_trace_save(
        names: *const *const c_char,
        tensors: *const *const c_void,
        is_param: *const c_int,
        n_named: usize,
        example: *const c_void,
        ctx: *mut c_void,
        forward: TracedForward,
        path: *const c_char,
    ) -> *mut c_char;
}

/// What `tb_script_trace_save` calls to compute the model's output: (context, input
/// at::Tensor*) to a new at::Tensor* (NULL on failure).
pub(crate) type TracedForward = unsafe extern "C" fn(*mut c_void, *const c_void) -> *mut c_void;
