//! Raw declarations of the C API in `csrc/optim_amp_shim.h`: the fused optimizer kernels (Adam,
//! foreach SGD, gradients to None), the total norm of gradient clipping, and mixed precision
//! (autocast regions, GradScaler's unscale). The safe wrappers live where they are used; every one
//! reads errors through `crate::shim`.
use std::os::raw::{c_char, c_int, c_void};

extern "C" {
    pub(crate) fn tb_fused_adam(
        params: *const *const c_void,
        grads: *const *const c_void,
        exp_avgs: *const *const c_void,
        exp_avg_sqs: *const *const c_void,
        steps: *const *const c_void,
        n: usize,
        lr: f64,
        beta1: f64,
        beta2: f64,
        weight_decay: f64,
        eps: f64,
        decoupled: c_int,
        grad_scale: *const c_void,
        found_inf: *const c_void,
    ) -> *mut c_char;
    pub(crate) fn tb_foreach_sgd(
        params: *const *const c_void,
        grads: *const *const c_void,
        bufs: *mut *mut c_void,
        steps: *const *const c_void,
        n: usize,
        lr: f64,
        momentum: f64,
        dampening: f64,
        nesterov: c_int,
        weight_decay: f64,
        found_inf: *const c_void,
    ) -> *mut c_char;
    pub(crate) fn tb_set_grads_to_none(params: *const *const c_void, n: usize) -> *mut c_char;

    pub(crate) fn tb_total_norm(
        tensors: *const *const c_void,
        n: usize,
        ord: f64,
        out: *mut c_void,
    ) -> *mut c_char;

    pub(crate) fn tb_amp_unscale(
        grads: *const *const c_void,
        n: usize,
        found_inf: *const c_void,
        inv_scale: *const c_void,
    ) -> *mut c_char;

    pub(crate) fn tb_add_out(
        out: *mut c_void,
        self_: *const c_void,
        other: *const c_void,
        alpha: f64,
    ) -> *mut c_char;
    pub(crate) fn tb_addcmul_out(
        out: *mut c_void,
        self_: *const c_void,
        t1: *const c_void,
        t2: *const c_void,
        value: f64,
    ) -> *mut c_char;
    pub(crate) fn tb_addcdiv_out(
        out: *mut c_void,
        self_: *const c_void,
        t1: *const c_void,
        t2: *const c_void,
        value: f64,
    ) -> *mut c_char;

    pub(crate) fn tb_autocast_enter(
        device_type: c_int,
        enabled: c_int,
        dtype: c_int,
        prev_enabled: *mut c_int,
        prev_dtype: *mut c_int,
    ) -> *mut c_char;
    pub(crate) fn tb_autocast_exit(
        device_type: c_int,
        prev_enabled: c_int,
        prev_dtype: c_int,
    ) -> *mut c_char;
}
