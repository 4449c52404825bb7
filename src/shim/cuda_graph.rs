//! Raw declarations of the C API in `csrc/cuda_graph_shim.h`: a CUDA graph with its side
//! stream, autocast's weight-cast cache and setting a parameter's gradient. The safe wrapper
//! is `crate::train::cuda_graph`; errors are read through `crate::shim`.
use std::os::raw::{c_char, c_int, c_void};

/// An opaque graph and side stream (`tb_cuda_graph`).
#[repr(C)]
pub(crate) struct TbCudaGraph {
    _private: [u8; 0],
}

extern "C" {
    pub(crate) fn tb_cuda_graph_new(index: c_int, out: *mut *mut TbCudaGraph) -> *mut c_char;
    pub(crate) fn tb_cuda_graph_free(g: *mut TbCudaGraph);
    pub(crate) fn tb_cuda_graph_enter_side_stream(g: *mut TbCudaGraph) -> *mut c_char;
    pub(crate) fn tb_cuda_graph_exit_side_stream(g: *mut TbCudaGraph) -> *mut c_char;
    pub(crate) fn tb_cuda_graph_capture_begin(g: *mut TbCudaGraph) -> *mut c_char;
    pub(crate) fn tb_cuda_graph_capture_end(g: *mut TbCudaGraph) -> *mut c_char;
    pub(crate) fn tb_cuda_graph_replay(g: *mut TbCudaGraph) -> *mut c_char;
    pub(crate) fn tb_autocast_cache(on: c_int, previous: *mut c_int) -> *mut c_char;
    pub(crate) fn tb_set_grads(
        params: *const *const c_void,
        grads: *const *const c_void,
        n: usize,
    ) -> *mut c_char;
}
