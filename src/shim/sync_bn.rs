//! Raw declarations of the C API in `csrc/sync_bn_shim.h`: SyncBatchNorm's process-group handle and
//! its autograd function. The safe wrappers live where they are used; every one reads errors
//! through `crate::shim`.
use std::os::raw::{c_char, c_void};

/// An opaque SyncBatchNorm group (`tb_sync_group`).
#[repr(C)]
pub(crate) struct TbSyncGroup {
    _private: [u8; 0],
}

extern "C" {
    pub(crate) fn tb_sync_group_new(
        pg: *mut super::c10d::TbPg,
        out: *mut *mut TbSyncGroup,
    ) -> *mut c_char;
    pub(crate) fn tb_sync_group_free(g: *mut TbSyncGroup);
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn tb_sync_batch_norm(
        g: *mut TbSyncGroup,
        input: *const c_void,
        weight: *const c_void,
        bias: *const c_void,
        running_mean: *const c_void,
        running_var: *const c_void,
        momentum: f64,
        eps: f64,
        out: *mut *mut c_void,
    ) -> *mut c_char;
}
