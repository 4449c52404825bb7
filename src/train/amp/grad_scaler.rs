//! `torch.amp.GradScaler` for float16 training: the loss is multiplied by a scale before
//! backward so that small gradients survive float16; before the optimizer step the gradients
//! are divided by it again, and a step whose gradients hold an inf or nan is skipped. The scale
//! halves after such a step and doubles after `growth_interval` finite steps in a row.
//!
//! Built on libtorch's `_amp_foreach_non_finite_check_and_unscale_` and `_amp_update_scale_`.
//! The inf flag stays on the device: with fused Adam/AdamW the kernel itself unscales and
//! skips (torch's fused path); SGD's step is computed and then kept or dropped on the device
//! (`where(found_inf, old, new)`: bit for bit torch's step when the flag is 0, nothing changed
//! when it is 1), where torch's GradScaler reads the flag for every non-fused optimizer. The
//! flag is read on the host (counted by [`host_reads`](crate::train::host_reads)) only where
//! skipping needs the host: a step that would create SGD's momentum buffers (a skipped first
//! step creates none) and per-tensor Adam/AdamW (their bias corrections take the step count
//! on the host).
use std::os::raw::c_void;

use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use crate::shim::optim_amp::tb_amp_unscale;
use crate::shim::{check_kernel as check, tensor_ptrs as ptrs};
use crate::train::profile::count_host_read;
use crate::train::Optimizer;
use crate::Result;

/// GradScaler's unscale: every gradient times `inv_scale` in place; `found_inf` (a float32
/// scalar) becomes 1.0 if any gradient held an inf or nan.
fn amp_unscale(grads: &[&Tensor], found_inf: &Tensor, inv_scale: &Tensor) -> Result<()> {
    let g = ptrs(grads);
    // SAFETY: live tensors for the whole call.
    check("_amp_foreach_non_finite_check_and_unscale_", unsafe {
        tb_amp_unscale(
            g.as_ptr(),
            g.len(),
            found_inf.as_ptr() as *const c_void,
            inv_scale.as_ptr() as *const c_void,
        )
    })
}

/// GradScaler's settings, torch's defaults via `Default`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct GradScalerConfig {
    /// The scale to start with (torch's `init_scale`, default 2^16 = 65536).
    pub init_scale: f64,
    /// Factor applied to the scale after `growth_interval` finite steps in a row (default 2).
    pub growth_factor: f64,
    /// Factor applied to the scale after a step with an inf/nan gradient (default 0.5).
    pub backoff_factor: f64,
    /// Finite steps in a row before the scale grows (default 2000).
    pub growth_interval: i64,
}

impl Default for GradScalerConfig {
    /// `torch.amp.GradScaler()`: initial scale 2^16, x2 after 2000 finite steps, x0.5 after an
    /// inf/nan.
    fn default() -> Self {
        GradScalerConfig {
            init_scale: 65536.0,
            growth_factor: 2.0,
            backoff_factor: 0.5,
            growth_interval: 2000,
        }
    }
}

/// What a checkpoint keeps of a [`GradScaler`] (torch's `state_dict()` fields).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct GradScalerState {
    /// The scaler's settings.
    pub config: GradScalerConfig,
    /// The current loss scale.
    pub scale: f64,
    /// Finite steps in a row since the scale last changed (torch's `_growth_tracker`).
    pub growth_tracker: i64,
}

/// Dynamic loss scaling; see the module documentation.
///
/// ```
/// use tch::{Device, Kind, Tensor};
/// use trainbook::train::GradScaler;
/// let scaler = GradScaler::new(Device::Cpu);
/// let loss = Tensor::from(0.5f32);
/// assert_eq!(scaler.scale(&loss).double_value(&[]), 0.5 * 65536.0);
/// ```
pub struct GradScaler {
    config: GradScalerConfig,
    scale: Tensor,
    growth_tracker: Tensor,
    /// The inf flag of an [`unscale_`](Self::unscale_) since the last step: the gradients are
    /// already divided by the scale.
    unscaled: Option<Tensor>,
}

impl GradScaler {
    /// torch's defaults, state on `device`.
    pub fn new(device: Device) -> GradScaler {
        GradScaler::with_config(device, GradScalerConfig::default())
    }

    /// A scaler with the given settings, state on `device`.
    pub fn with_config(device: Device, config: GradScalerConfig) -> GradScaler {
        GradScaler {
            config,
            scale: Tensor::full([], config.init_scale, (Kind::Float, device)),
            growth_tracker: Tensor::zeros([], (Kind::Int, device)),
            unscaled: None,
        }
    }

    /// `loss * scale`, what backward should run on.
    pub fn scale(&self, loss: &Tensor) -> Tensor {
        loss * &self.scale
    }

    /// `scaler.unscale_(optimizer)`: divides the gradients by the scale now (and notes whether
    /// one holds an inf or nan), so that they can be clipped or inspected before
    /// [`step`](Self::step), which then does not unscale again. Once per step: a second call
    /// before the step is an error, as in torch.
    pub fn unscale_(&mut self, optimizer: &Optimizer) -> Result<()> {
        if self.unscaled.is_some() {
            return Err(crate::Error::InvalidArgument(
                "GradScaler::unscale_ was already called since the last step".into(),
            ));
        }
        let found_inf = Tensor::zeros([], (Kind::Float, self.scale.device()));
        self.check_grads(optimizer, &found_inf, &self.inv_scale())?;
        self.unscaled = Some(found_inf);
        Ok(())
    }

    /// Whether [`unscale_`](Self::unscale_) ran since the last step.
    pub(crate) fn is_unscaled(&self) -> bool {
        self.unscaled.is_some()
    }

    /// 1/scale in float32, computed in float64 as torch does.
    fn inv_scale(&self) -> Tensor {
        self.scale.to_kind(Kind::Double).reciprocal().to_kind(Kind::Float)
    }

    /// Unscales the gradients (unless [`unscale_`](Self::unscale_) did), steps `optimizer`
    /// unless a gradient is inf/nan, and updates the scale (torch's `scaler.step(optimizer);
    /// scaler.update()`). Returns the found-inf flag as a device scalar (1.0: the step was
    /// skipped), without reading it.
    pub fn step(&mut self, optimizer: &mut Optimizer) -> Result<Tensor> {
        let device = self.scale.device();
        let unscaled = self.unscaled.take();
        let done = unscaled.is_some();
        let found_inf = unscaled.unwrap_or_else(|| Tensor::zeros([], (Kind::Float, device)));
        if optimizer.fuses_loss_scaling() {
            let one = Tensor::ones([], (Kind::Float, device));
            // Only the check: the fused kernel divides by the scale and skips the step itself
            // (by 1 when the gradients were unscaled already: torch passes no scale then).
            if !done {
                self.check_grads(optimizer, &found_inf, &one)?;
            }
            let grad_scale = if done { one } else { self.scale.shallow_clone() };
            optimizer.step_scaled(&grad_scale, &found_inf)?;
        } else {
            if !done {
                self.check_grads(optimizer, &found_inf, &self.inv_scale())?;
            }
            if optimizer.skips_on_device() {
                optimizer.step_skipping(&found_inf)?;
            } else {
                count_host_read();
                if found_inf.double_value(&[]) == 0.0 {
                    optimizer.step()?;
                }
            }
        }
        let _ = self.scale.internal_amp_update_scale_(
            &self.growth_tracker,
            &found_inf,
            self.config.growth_factor,
            self.config.backoff_factor,
            self.config.growth_interval,
        );
        Ok(found_inf)
    }

    fn check_grads(
        &self,
        optimizer: &Optimizer,
        found_inf: &Tensor,
        inv_scale: &Tensor,
    ) -> Result<()> {
        let grads: Vec<Tensor> =
            optimizer.parameters().iter().map(|(_, p)| p.grad()).filter(Tensor::defined).collect();
        let refs: Vec<&Tensor> = grads.iter().collect();
        tch::no_grad(|| amp_unscale(&refs, found_inf, inv_scale))
    }

    /// The current scale (a read from the device).
    pub fn current_scale(&self) -> f64 {
        self.scale.double_value(&[])
    }

    /// Settings and current scale, for a checkpoint (reads the device).
    pub fn state(&self) -> GradScalerState {
        GradScalerState {
            config: self.config,
            scale: self.current_scale(),
            growth_tracker: self.growth_tracker.int64_value(&[]),
        }
    }

    /// Restores what [`state`](Self::state) returned.
    pub fn load_state(&mut self, state: &GradScalerState) {
        let device = self.scale.device();
        self.config = state.config;
        self.scale = Tensor::full([], state.scale, (Kind::Float, device));
        self.growth_tracker = Tensor::full([], state.growth_tracker, (Kind::Int, device));
        self.unscaled = None;
    }
}

/// The loss scaler as a part of a run's checkpoints (torch's `GradScaler.state_dict()`):
/// its settings, scale and growth tracker under the key `grad_scaler`.
impl crate::stateful::Stateful for GradScaler {
    fn state_key(&self) -> String {
        "grad_scaler".into()
    }
    fn state_dict(&self) -> Result<crate::stateful::PartState> {
        crate::stateful::PartState::of_serde(&self.state())
    }
    fn load_state_dict(&mut self, state: crate::stateful::PartState) -> Result<()> {
        let saved: GradScalerState = state.parse(&self.state_key())?;
        self.load_state(&saved);
        Ok(())
    }
}
