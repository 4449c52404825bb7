//! torch's element-wise ops with the scalar argument that tch's wrappers leave out:
//! `add(other, alpha=)`, `addcmul(t1, t2, value=)` and `addcdiv(t1, t2, value=)`, in place and
//! not. torch.optim's update rules are written with them, and the scalar is part of the
//! arithmetic: `p.add_(b, alpha=-lr)` is one kernel with the scalar inside it (torch's CPU
//! kernel computes it as a fused multiply-add where the CPU has one, so it rounds once), where
//! `p + b * -lr` is two kernels that round twice. An [`UpdateRule`](crate::train::UpdateRule)
//! written with these runs the very kernels torch.optim's single-tensor loop runs.
use std::os::raw::c_void;

use tch::Tensor;

use crate::shim::check_kernel;
use crate::shim::optim_amp::{tb_add_out, tb_addcdiv_out, tb_addcmul_out};
use crate::Result;

/// `t.add_(other, alpha=alpha)`: `t += alpha * other`.
///
/// ```
/// use tch::Tensor;
/// let mut p = Tensor::from_slice(&[1.0f32, 2.0]);
/// trainbook::train::ops::add_(&mut p, &Tensor::from_slice(&[10.0f32, 10.0]), -0.5)?;
/// assert_eq!(Vec::<f32>::try_from(&p)?, [-4.0, -3.0]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn add_(t: &mut Tensor, other: &Tensor, alpha: f64) -> Result<()> {
    let out = t.as_mut_ptr() as *mut c_void;
    // SAFETY: the tensors live for the call; `out` is `t` itself (the in-place form).
    check_kernel("add_ (alpha)", unsafe {
        tb_add_out(out, t.as_ptr() as *const c_void, other.as_ptr() as *const c_void, alpha)
    })
}

/// `t.add(other, alpha=alpha)`: a new tensor `t + alpha * other`.
pub fn add(t: &Tensor, other: &Tensor, alpha: f64) -> Result<Tensor> {
    let mut out = t.empty_like();
    let ptr = out.as_mut_ptr() as *mut c_void;
    // SAFETY: the tensors live for the call; at::add_out resizes `out` as needed.
    check_kernel("add (alpha)", unsafe {
        tb_add_out(ptr, t.as_ptr() as *const c_void, other.as_ptr() as *const c_void, alpha)
    })?;
    Ok(out)
}

/// `t.addcmul_(t1, t2, value=value)`: `t += value * t1 * t2`.
pub fn addcmul_(t: &mut Tensor, t1: &Tensor, t2: &Tensor, value: f64) -> Result<()> {
    let out = t.as_mut_ptr() as *mut c_void;
    // SAFETY: as in `add_`.
    check_kernel("addcmul_ (value)", unsafe {
        tb_addcmul_out(out, t.as_ptr() as *const c_void, ptr(t1), ptr(t2), value)
    })
}

/// `t.addcmul(t1, t2, value=value)`: a new tensor `t + value * t1 * t2`.
pub fn addcmul(t: &Tensor, t1: &Tensor, t2: &Tensor, value: f64) -> Result<Tensor> {
    let mut out = t.empty_like();
    let o = out.as_mut_ptr() as *mut c_void;
    // SAFETY: as in `add`.
    check_kernel("addcmul (value)", unsafe {
        tb_addcmul_out(o, t.as_ptr() as *const c_void, ptr(t1), ptr(t2), value)
    })?;
    Ok(out)
}

/// `t.addcdiv_(t1, t2, value=value)`: `t += value * t1 / t2`.
pub fn addcdiv_(t: &mut Tensor, t1: &Tensor, t2: &Tensor, value: f64) -> Result<()> {
    let out = t.as_mut_ptr() as *mut c_void;
    // SAFETY: as in `add_`.
    check_kernel("addcdiv_ (value)", unsafe {
        tb_addcdiv_out(out, t.as_ptr() as *const c_void, ptr(t1), ptr(t2), value)
    })
}

fn ptr(t: &Tensor) -> *const c_void {
    t.as_ptr() as *const c_void
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scalar_is_part_of_the_op() {
        let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0]);
        let b = Tensor::from_slice(&[4.0f32, 5.0, 6.0]);
        let c = Tensor::from_slice(&[2.0f32, 2.0, 3.0]);
        let v = |t: &Tensor| Vec::<f32>::try_from(t).unwrap();
        assert_eq!(v(&add(&a, &b, 0.5).unwrap()), [3.0, 4.5, 6.0]);
        assert_eq!(v(&addcmul(&a, &b, &c, -1.0).unwrap()), [-7.0, -8.0, -15.0]);
        let mut t = a.copy();
        addcdiv_(&mut t, &b, &c, 2.0).unwrap();
        assert_eq!(v(&t), [5.0, 7.0, 7.0]);
        addcmul_(&mut t, &b, &c, 0.5).unwrap();
        assert_eq!(v(&t), [9.0, 12.0, 16.0]);
        let err = add(&a, &Tensor::from_slice(&[1.0f32, 2.0]), 1.0).unwrap_err().to_string();
        assert!(err.contains("add"), "{err}");
    }
}
