//! libtorch's multi-tensor optimizer kernels, which tch-rs does not bind, called through
//! trainbook's C++ shim (`csrc/optim_amp_shim.cpp`): `_fused_adam_` / `_fused_adamw_` and the
//! `_foreach_*` ops of torch.optim's multi-tensor SGD; and setting gradients to None, which
//! tch-rs cannot do either.
use std::os::raw::{c_int, c_void};

use tch::Tensor;

use crate::shim::optim_amp::{tb_foreach_sgd, tb_fused_adam, tb_set_grads_to_none};
use crate::shim::{check_kernel as check, tensor_ptrs as ptrs};
use crate::{Error, Result};

/// `p.grad = None` for every parameter (`zero_grad(set_to_none=True)`).
pub(crate) fn set_grads_to_none(params: &[&Tensor]) -> Result<()> {
    let p = ptrs(params);
    // SAFETY: `p` holds one live at::Tensor* per entry of `params`.
    check("zero_grad", unsafe { tb_set_grads_to_none(p.as_ptr(), p.len()) })
}

fn optional_ptr(t: Option<&Tensor>) -> *const c_void {
    t.map_or(std::ptr::null(), |t| t.as_ptr() as *const c_void)
}

/// Adam's hyper-parameters for [`fused_adam`]; `decoupled` selects AdamW's weight decay.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AdamArgs {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub weight_decay: f64,
    pub eps: f64,
    pub decoupled: bool,
}

/// The tensors of one multi-tensor Adam update; all lists have one entry per parameter.
pub(crate) struct AdamLists<'a> {
    pub params: Vec<&'a Tensor>,
    pub grads: Vec<&'a Tensor>,
    pub exp_avgs: Vec<&'a Tensor>,
    pub exp_avg_sqs: Vec<&'a Tensor>,
    /// float32 scalars, incremented by the call (decremented again when `found_inf` is 1).
    pub steps: Vec<&'a Tensor>,
}

/// torch.optim.Adam/AdamW(fused=True)'s update of all parameters in one kernel call.
pub(crate) fn fused_adam(
    lists: &AdamLists,
    args: AdamArgs,
    grad_scale: Option<&Tensor>,
    found_inf: Option<&Tensor>,
) -> Result<()> {
    let n = lists.params.len();
    if [lists.grads.len(), lists.exp_avgs.len(), lists.exp_avg_sqs.len(), lists.steps.len()]
        .iter()
        .any(|&l| l != n)
    {
        return Err(Error::InvalidArgument(
            "fused Adam: parameter, gradient and state lists differ in length".into(),
        ));
    }
    let (p, g, m, v, s) = (
        ptrs(&lists.params),
        ptrs(&lists.grads),
        ptrs(&lists.exp_avgs),
        ptrs(&lists.exp_avg_sqs),
        ptrs(&lists.steps),
    );
    let op = if args.decoupled { "_fused_adamw_" } else { "_fused_adam_" };
    // SAFETY: every pointer is a live at::Tensor owned by the caller for the whole call.
    check(op, unsafe {
        tb_fused_adam(
            p.as_ptr(),
            g.as_ptr(),
            m.as_ptr(),
            v.as_ptr(),
            s.as_ptr(),
            n,
            args.lr,
            args.beta1,
            args.beta2,
            args.weight_decay,
            args.eps,
            args.decoupled as c_int,
            optional_ptr(grad_scale),
            optional_ptr(found_inf),
        )
    })
}

/// SGD's hyper-parameters for [`foreach_sgd`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct SgdArgs {
    pub lr: f64,
    pub momentum: f64,
    pub dampening: f64,
    pub nesterov: bool,
    pub weight_decay: f64,
}

/// torch.optim.SGD(foreach=True)'s update. `bufs[i]` is parameter i's momentum buffer; a
/// `None` is filled with a new buffer (the first step's copy of the gradient) when momentum
/// is on. `steps` (device step counts, one per parameter) are incremented. With `found_inf`
/// (GradScaler's flag) nothing changes where the flag is 1, without a read on the host; every
/// buffer must exist then.
pub(crate) fn foreach_sgd(
    params: &[&Tensor],
    grads: &[&Tensor],
    bufs: &mut [Option<Tensor>],
    steps: Option<&[&Tensor]>,
    args: SgdArgs,
    found_inf: Option<&Tensor>,
) -> Result<()> {
    let n = params.len();
    if grads.len() != n || bufs.len() != n || steps.is_some_and(|s| s.len() != n) {
        return Err(Error::InvalidArgument(
            "foreach SGD: parameter, gradient, buffer and step lists differ in length".into(),
        ));
    }
    let (p, g) = (ptrs(params), ptrs(grads));
    let s = steps.map(ptrs);
    let mut raw: Vec<*mut c_void> = bufs
        .iter()
        .map(|b| b.as_ref().map_or(std::ptr::null_mut(), |t| t.as_ptr() as *mut c_void))
        .collect();
    // SAFETY: live tensors for the whole call; the shim only writes into NULL entries of `raw`.
    let result = check("_foreach_* SGD", unsafe {
        tb_foreach_sgd(
            p.as_ptr(),
            g.as_ptr(),
            raw.as_mut_ptr(),
            s.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            n,
            args.lr,
            args.momentum,
            args.dampening,
            args.nesterov as c_int,
            args.weight_decay,
            optional_ptr(found_inf),
        )
    });
    for (slot, ptr) in bufs.iter_mut().zip(raw) {
        if slot.is_none() && !ptr.is_null() {
            // SAFETY: the shim allocated this at::Tensor with `new` for us to own.
            *slot = Some(unsafe { Tensor::from_ptr(ptr as *mut torch_sys::C_tensor) });
        }
    }
    result
}
