//! Raw declarations of the C API in `csrc/c10d_shim.h` (compiled by `build.rs`): the shim's
//! strings and buffers, the libtorch version, the generators' state, TCPStore, process groups,
//! the Reducer. Only `shim`, `rng::generator`, `dist::store`, `dist::process_group` and
//! `dist::reducer` call these; everything else uses the safe types. Errors are read through the shim's one convention (`crate::shim`).
use std::os::raw::{c_char, c_int, c_void};

#[repr(C)]
pub struct TbStore {
    _private: [u8; 0],
}
#[repr(C)]
pub struct TbPg {
    _private: [u8; 0],
}
#[repr(C)]
pub struct TbWork {
    _private: [u8; 0],
}
#[repr(C)]
pub struct TbReducer {
    _private: [u8; 0],
}

pub const BACKEND_GLOO: c_int = 0;
pub const BACKEND_NCCL: c_int = 1;
pub const HOOK_ALLREDUCE: c_int = 0;
pub const HOOK_FP16: c_int = 1;
pub const HOOK_BF16: c_int = 2;

extern "C" {
    pub(crate) fn tb_string_free(s: *mut c_char);
    pub(crate) fn tb_bytes_free(b: *mut u8);
    pub(crate) fn tb_torch_version() -> *const c_char;
    pub(crate) fn tb_has_nccl() -> c_int;
    pub(crate) fn tb_rng_get_state(
        device_type: c_int,
        index: c_int,
        out: *mut *mut u8,
        len: *mut usize,
    ) -> *mut c_char;
    pub(crate) fn tb_rng_set_state(
        device_type: c_int,
        index: c_int,
        state: *const u8,
        len: usize,
    ) -> *mut c_char;
    pub(crate) fn tb_rng_manual_seed(device_type: c_int, index: c_int, seed: u64) -> *mut c_char;

    pub fn tb_tcp_store_new(
        host: *const c_char,
        port: u16,
        is_server: c_int,
        num_workers: i64,
        wait_workers: c_int,
        timeout_ms: i64,
        out: *mut *mut TbStore,
    ) -> *mut c_char;
    pub fn tb_prefix_store_new(
        prefix: *const c_char,
        base: *const TbStore,
        out: *mut *mut TbStore,
    ) -> *mut c_char;
    pub fn tb_store_set(
        s: *mut TbStore,
        key: *const c_char,
        value: *const u8,
        len: usize,
    ) -> *mut c_char;
    pub fn tb_store_get(
        s: *mut TbStore,
        key: *const c_char,
        value: *mut *mut u8,
        len: *mut usize,
    ) -> *mut c_char;
    pub fn tb_store_add(
        s: *mut TbStore,
        key: *const c_char,
        delta: i64,
        out: *mut i64,
    ) -> *mut c_char;
    pub fn tb_store_free(s: *mut TbStore);

    pub fn tb_pg_new(
        store: *const TbStore,
        backend: c_int,
        rank: c_int,
        size: c_int,
        timeout_ms: i64,
        cuda_device: c_int,
        out: *mut *mut TbPg,
    ) -> *mut c_char;
    pub fn tb_pg_free(pg: *mut TbPg);
    pub fn tb_pg_allreduce_sum(
        pg: *mut TbPg,
        tensor: *const c_void,
        out: *mut *mut TbWork,
    ) -> *mut c_char;
    pub fn tb_pg_broadcast(
        pg: *mut TbPg,
        tensor: *const c_void,
        root: c_int,
        out: *mut *mut TbWork,
    ) -> *mut c_char;
    pub fn tb_pg_all_gather(
        pg: *mut TbPg,
        input: *const c_void,
        outputs: *const *const c_void,
        n: usize,
        out: *mut *mut TbWork,
    ) -> *mut c_char;
    pub fn tb_pg_barrier(pg: *mut TbPg, out: *mut *mut TbWork) -> *mut c_char;
    pub fn tb_pg_broadcast_coalesced(
        pg: *mut TbPg,
        tensors: *const *const c_void,
        n: usize,
        buffer_bytes: i64,
        root: c_int,
    ) -> *mut c_char;
    pub fn tb_pg_verify_params(
        pg: *mut TbPg,
        params: *const *const c_void,
        n: usize,
    ) -> *mut c_char;

    #[allow(clippy::too_many_arguments)]
    pub fn tb_reducer_new(
        pg: *mut TbPg,
        params: *const *const c_void,
        names: *const *const c_char,
        n: usize,
        bucket_bytes: i64,
        first_bucket_bytes: i64,
        find_unused: c_int,
        gradient_as_bucket_view: c_int,
        static_graph: c_int,
        comm_hook: c_int,
        out: *mut *mut TbReducer,
    ) -> *mut c_char;
    pub fn tb_reducer_prepare_for_forward(
        r: *mut TbReducer,
        prepare: c_int,
        rebuilt: *mut c_int,
    ) -> *mut c_char;
    pub fn tb_reducer_prepare_for_backward(
        r: *mut TbReducer,
        outputs: *const *const c_void,
        n: usize,
    ) -> *mut c_char;
    pub fn tb_reducer_delay_all_reduce(r: *mut TbReducer) -> *mut c_char;
    pub fn tb_reducer_buckets(
        r: *mut TbReducer,
        indices: *mut i64,
        cap: usize,
        counts: *mut i64,
        counts_cap: usize,
        buckets: *mut usize,
    ) -> *mut c_char;
    pub fn tb_reducer_free(r: *mut TbReducer);

    pub fn tb_work_wait(w: *mut TbWork, timeout_ms: i64) -> *mut c_char;
    pub fn tb_work_free(w: *mut TbWork);
}

pub(crate) use super::check;
