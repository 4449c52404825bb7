//! Gradient clipping with torch's semantics: `torch.nn.utils.clip_grad_norm_` (the total norm
//! of all gradients as one vector, from `_foreach_norm` and `linalg.vector_norm` as torch
//! computes it; every gradient multiplied by `min(1, max_norm / (total + 1e-6))` without a
//! host read) and `clip_grad_value_` (each element clamped to `[-v, v]`). [`GradClip`] is the
//! setting `EpochOptions::clip_grad` and `Trainer::clip_grad_norm` apply after each optimizer
//! step's backward, after `GradScaler::unscale_` under float16, as a PyTorch loop does.
use std::os::raw::c_void;

use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

use crate::shim::optim_amp::tb_total_norm;
use crate::shim::{check_kernel, tensor_ptrs};
use crate::train::Optimizer;
use crate::{Error, Result};

/// How gradients are clipped before each optimizer step.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum GradClip {
    /// `clip_grad_norm_(params, max_norm, norm_type)`: scale all gradients together so that
    /// their total `norm_type`-norm is at most `max_norm` (2.0 is torch's default norm;
    /// `f64::INFINITY` the largest magnitude).
    Norm {
        /// The largest total norm let through.
        max_norm: f64,
        /// The p of the p-norm.
        norm_type: f64,
    },
    /// `clip_grad_value_(params, v)`: every gradient element clamped to `[-v, v]`.
    Value(f64),
}

impl GradClip {
    /// `clip_grad_norm_(params, max_norm)` with torch's default 2-norm.
    pub fn norm(max_norm: f64) -> GradClip {
        GradClip::Norm { max_norm, norm_type: 2.0 }
    }

    /// An error naming the setting when it is not a finite positive bound (or a norm type
    /// below 1: not a norm).
    pub fn validate(&self) -> Result<()> {
        let ok = match *self {
            GradClip::Norm { max_norm, norm_type } => {
                max_norm.is_finite() && max_norm > 0.0 && norm_type >= 1.0
            }
            GradClip::Value(v) => v.is_finite() && v > 0.0,
        };
        if ok {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!(
                "gradient clipping {self:?}: the bound must be finite and positive (and the norm \
                 type at least 1)"
            )))
        }
    }

    /// Clips the gradients of `optimizer`'s parameters; returns the total norm before clipping
    /// for [`GradClip::Norm`] (a device scalar, not read), `None` for [`GradClip::Value`].
    pub fn apply(&self, optimizer: &Optimizer) -> Result<Option<Tensor>> {
        let grads = grads(optimizer);
        match *self {
            GradClip::Norm { max_norm, norm_type } => {
                clip_grad_norm(&grads, max_norm, norm_type).map(Some)
            }
            GradClip::Value(v) => {
                clip_grad_value(&grads, v);
                Ok(None)
            }
        }
    }
}

/// The defined gradients of `optimizer`'s parameters, in its (torch's) parameter order.
fn grads(optimizer: &Optimizer) -> Vec<Tensor> {
    optimizer.parameters().iter().map(|(_, p)| p.grad()).filter(Tensor::defined).collect()
}

/// `torch.nn.utils.get_total_norm(grads, norm_type)`: the `norm_type`-norm of all of `grads`
/// as one vector, a device scalar (0 for no gradients). Gradients must share one device and
/// dtype (as a model's do); otherwise it is an error naming them.
pub fn total_norm(grads: &[Tensor], norm_type: f64) -> Result<Tensor> {
    let Some(first) = grads.first() else {
        return Ok(Tensor::from(0f32));
    };
    let (device, kind) = (first.device(), first.kind());
    if let Some(g) = grads.iter().find(|g| g.device() != device || g.kind() != kind) {
        return Err(Error::InvalidArgument(format!(
            "total_norm: gradients on {device:?}/{kind:?} and {:?}/{:?}; clip one device and \
             dtype at a time",
            g.device(),
            g.kind()
        )));
    }
    let out = Tensor::zeros([], (kind, device));
    let refs: Vec<&Tensor> = grads.iter().collect();
    let ptrs = tensor_ptrs(&refs);
    // SAFETY: the tensors and `out` live for the whole call.
    check_kernel("total_norm (_foreach_norm, linalg.vector_norm)", unsafe {
        tb_total_norm(ptrs.as_ptr(), ptrs.len(), norm_type, out.as_ptr() as *mut c_void)
    })?;
    Ok(out)
}

/// `torch.nn.utils.clip_grad_norm_` over `grads`: multiplies each by
/// `clamp(max_norm / (total + 1e-6), max=1)` in place and returns the total norm before clipping
/// (a device scalar: no host read).
///
/// ```
/// use tch::{Device, Kind, Tensor};
/// let g = [Tensor::from_slice(&[3.0f32, 0.0]), Tensor::from_slice(&[4.0f32])];
/// let total = trainbook::train::clip_grad_norm(&g, 1.0, 2.0)?;
/// assert_eq!(total.double_value(&[]), 5.0);
/// let n = (g[0].square().sum(Kind::Float) + g[1].square().sum(Kind::Float)).sqrt();
/// assert!((n.double_value(&[]) - 1.0).abs() < 1e-6);
/// # Ok::<(), trainbook::Error>(())
/// ```
pub fn clip_grad_norm(grads: &[Tensor], max_norm: f64, norm_type: f64) -> Result<Tensor> {
    let total = total_norm(grads, norm_type)?;
    if grads.is_empty() {
        return Ok(total);
    }
    tch::no_grad(|| {
        // torch: `max_norm / (total + 1e-6)` is Tensor.__rtruediv__, i.e. reciprocal() * max_norm.
        let coef = ((&total + 1e-6).reciprocal() * max_norm).clamp_max(1.0);
        for g in grads {
            let _ = g.shallow_clone().f_mul_(&coef).map_err(Error::Torch)?;
        }
        Ok(total)
    })
}

/// `torch.nn.utils.clip_grad_value_` over `grads`: each element clamped to `[-value, value]`
/// in place.
pub fn clip_grad_value(grads: &[Tensor], value: f64) {
    tch::no_grad(|| {
        for g in grads {
            let _ = g.shallow_clone().clamp_(-value, value);
        }
    });
}

/// The mean of the total norms a run of steps returned, kept on the device.
#[derive(Default)]
pub(crate) struct NormMean {
    sum: Option<Tensor>,
    steps: u64,
}

impl NormMean {
    pub(crate) fn add(&mut self, norm: &Tensor) {
        let norm = norm.detach().to_kind(Kind::Double);
        self.sum = Some(match self.sum.take() {
            Some(s) => s + norm,
            None => norm,
        });
        self.steps += 1;
    }

    /// The mean (one host read, counted), or `None` when no step recorded a norm.
    pub(crate) fn read(&self) -> Option<f64> {
        let sum = self.sum.as_ref()?;
        crate::train::profile::count_host_read();
        Some(sum.double_value(&[]) / self.steps as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Device;

    #[test]
    fn bad_settings_are_errors_naming_them() {
        for bad in [GradClip::norm(0.0), GradClip::norm(f64::NAN), GradClip::Value(-1.0)] {
            let err = bad.validate().unwrap_err().to_string();
            assert!(err.contains("gradient clipping"), "{err}");
        }
        let not_a_norm = GradClip::Norm { max_norm: 1.0, norm_type: 0.5 };
        assert!(not_a_norm.validate().is_err());
        assert!(GradClip::norm(1.0).validate().is_ok() && GradClip::Value(0.1).validate().is_ok());
    }

    #[test]
    fn norms_of_mixed_dtypes_are_an_error_and_no_gradients_a_zero_norm() {
        let g = [
            Tensor::ones([2], (Kind::Float, Device::Cpu)),
            Tensor::ones([2], (Kind::Double, Device::Cpu)),
        ];
        assert!(total_norm(&g, 2.0).unwrap_err().to_string().contains("one device and dtype"));
        assert_eq!(clip_grad_norm(&[], 1.0, 2.0).unwrap().double_value(&[]), 0.0);
    }

    #[test]
    fn value_clipping_clamps_each_element_and_small_norms_pass_unchanged() {
        let g = [Tensor::from_slice(&[-3.0f32, 0.5, 2.0])];
        clip_grad_value(&g, 1.0);
        assert_eq!(Vec::<f32>::try_from(&g[0]).unwrap(), [-1.0, 0.5, 1.0]);
        let small = [Tensor::from_slice(&[0.3f32, 0.4])];
        let total = clip_grad_norm(&small, 10.0, 2.0).unwrap();
        assert!((total.double_value(&[]) - 0.5).abs() < 1e-7);
        assert_eq!(Vec::<f32>::try_from(&small[0]).unwrap(), [0.3, 0.4], "coefficient 1");
        let inf = [Tensor::from_slice(&[-7.0f32, 2.0])];
        let total = clip_grad_norm(&inf, 1.0, f64::INFINITY).unwrap();
        assert_eq!(total.double_value(&[]), 7.0);
    }
}
