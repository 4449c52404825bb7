//! An exponential moving average of a model's weights, with the semantics of timm's
//! `ModelEmaV2`: a copy of every variable (parameters and BatchNorm running statistics), and
//! after each optimizer step `e = decay * e + (1 - decay) * m` for each of them, computed with
//! the same tensor operations (so the averages equal timm's bit for bit:
//! `tests/training/ema.rs`). The average is evaluated by putting its values into the model for
//! the duration of a call
//! ([`ModelEma::with_weights`]), and saved in checkpoints (`ema.safetensors`).
//!
//! torchvision's classification reference averages differently (`--model-ema`): every
//! `--model-ema-steps` batches, the first update a copy, and during the warmup epochs every
//! update a copy ([`EmaCadence`], [`ModelEma::torchvision`], [`torchvision_ema_decay`]).
use std::collections::HashMap;

use tch::nn::VarStore;
use tch::Tensor;

use crate::{Error, Result};

/// The moving average of a model's variables (timm's `ModelEmaV2`).
///
/// ```
/// use tch::{nn::VarStore, Device, Tensor};
/// use trainbook::train::ModelEma;
///
/// let vs = VarStore::new(Device::Cpu);
/// let w = vs.root().var_copy("w", &Tensor::from_slice(&[1.0f32]));
/// let mut ema = ModelEma::new(&vs, 0.5)?;
/// let _ = tch::no_grad(|| w.shallow_clone().fill_(3.0)); // an optimizer step
/// ema.update(&vs);
/// assert_eq!(f64::try_from(&ema.tensors()[0].1)?, 2.0); // 0.5 * 1 + 0.5 * 3
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ModelEma {
    decay: f64,
    /// The averages, by variable name, sorted.
    shadow: Vec<(String, Tensor)>,
    /// torchvision's cadence, when the average follows the reference's `--model-ema`.
    cadence: Option<EmaCadence>,
    /// Updates since the last copy (torch's `AveragedModel.n_averaged`); with a cadence, an
    /// update at 0 copies the model.
    n_averaged: u64,
}

/// When torchvision's classification reference updates its average (`--model-ema-steps`
/// and the warmup): after the optimizer step of every batch whose index in the epoch is a
/// multiple of `every_steps` (`i % model_ema_steps == 0`), and while the epoch is below
/// `copy_epochs` (`--lr-warmup-epochs`) the count of updates is set back to 0 after each, so
/// that every update there copies the model (torch's `AveragedModel` copies when
/// `n_averaged` is 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EmaCadence {
    /// Update after every this many batches (torchvision's `--model-ema-steps`, default 32).
    pub every_steps: u64,
    /// Epochs whose updates copy the model (torchvision's `--lr-warmup-epochs`).
    pub copy_epochs: u64,
}

/// The decay torchvision's classification reference gives its average: from `--model-ema-decay`
/// `decay`, `alpha = min(1, (1 - decay) * world_size * batch_size * every_steps / epochs)` and
/// the decay `1 - alpha`, in the reference's order of operations (so that the number is the
/// same to the last bit).
///
/// ```
/// use trainbook::train::torchvision_ema_decay;
/// // ResNet50's recipe on 8 GPUs: --batch-size 128 --model-ema-steps 32 --epochs 600.
/// let d = torchvision_ema_decay(0.99998, 8, 128, 32, 600);
/// assert!((d - (1.0 - 0.00002 * 8.0 * 128.0 * 32.0 / 600.0)).abs() < 1e-12);
/// ```
pub fn torchvision_ema_decay(
    decay: f64,
    world_size: u64,
    batch_size: u64,
    every_steps: u64,
    epochs: u64,
) -> f64 {
    let adjust = (world_size * batch_size * every_steps) as f64 / epochs as f64;
    let alpha = (1.0 - decay) * adjust;
    1.0 - alpha.min(1.0)
}

impl std::fmt::Debug for ModelEma {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ModelEma {{ decay: {}, {} tensors }}", self.decay, self.shadow.len())
    }
}

/// The variables of `vs` by name, sorted.
fn sorted_variables(vs: &VarStore) -> Vec<(String, Tensor)> {
    let mut vars: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    vars.sort_by(|a, b| a.0.cmp(&b.0));
    vars
}

impl ModelEma {
    /// Starts the average at the model's current values (timm copies the model). `decay` must
    /// be in [0, 1) (timm's default is 0.9999).
    pub fn new(vs: &VarStore, decay: f64) -> Result<ModelEma> {
        if !(0.0..1.0).contains(&decay) {
            return Err(Error::InvalidArgument(format!(
                "EMA decay {decay}: it must be at least 0 and below 1 (timm's default 0.9999)"
            )));
        }
        let shadow = tch::no_grad(|| {
            sorted_variables(vs).into_iter().map(|(n, t)| (n, t.detach().copy())).collect()
        });
        Ok(ModelEma { decay, shadow, cadence: None, n_averaged: 0 })
    }

    /// torchvision's reference average: `decay` (see [`torchvision_ema_decay`]), updated on
    /// `cadence` by [`after_step`](Self::after_step), the first update a copy of the model
    /// (the reference's `ExponentialMovingAverage`, a `torch.optim.swa_utils.AveragedModel`
    /// with `use_buffers=True`; its integer `num_batches_tracked` is not averaged here). `decay`
    /// must be in [0, 1] (1 keeps the first copy) and `every_steps` at least 1.
    pub fn torchvision(vs: &VarStore, decay: f64, cadence: EmaCadence) -> Result<ModelEma> {
        if !(0.0..=1.0).contains(&decay) || cadence.every_steps == 0 {
            return Err(Error::InvalidArgument(format!(
                "model EMA decay {decay} and steps {}: the decay must be in [0, 1] and the \
                 steps at least 1 (torchvision's --model-ema-decay, --model-ema-steps)",
                cadence.every_steps
            )));
        }
        let mut ema = ModelEma::new(vs, 0.0)?;
        ema.decay = decay;
        ema.cadence = Some(cadence);
        Ok(ema)
    }

    /// A run's average: torchvision's with `cadence`, else timm's.
    pub(crate) fn of_run(
        vs: &VarStore,
        decay: f64,
        cadence: Option<EmaCadence>,
    ) -> Result<ModelEma> {
        match cadence {
            Some(c) => ModelEma::torchvision(vs, decay, c),
            None => ModelEma::new(vs, decay),
        }
    }

    /// torchvision's cadence, when this average has one.
    pub fn cadence(&self) -> Option<EmaCadence> {
        self.cadence
    }

    /// What the loop calls after the optimizer step of batch `batch_index` (0-based, in the
    /// epoch) of `epoch` (0-based): [`update`](Self::update) every step without a cadence
    /// (timm's), else torchvision's rule ([`EmaCadence`]).
    pub fn after_step(&mut self, vs: &VarStore, epoch: u64, batch_index: u64) {
        let Some(cadence) = self.cadence else { return self.update(vs) };
        if batch_index % cadence.every_steps != 0 {
            return;
        }
        if self.n_averaged == 0 {
            let vars = vs.variables();
            tch::no_grad(|| {
                for (name, e) in &mut self.shadow {
                    if let Some(m) = vars.get(name) {
                        e.copy_(m);
                    }
                }
            });
        } else {
            self.update(vs);
        }
        self.n_averaged += 1;
        if epoch < cadence.copy_epochs {
            self.n_averaged = 0;
        }
    }

    /// The decay.
    pub fn decay(&self) -> f64 {
        self.decay
    }

    /// The averages, by variable name (sorted), on the model's devices.
    pub fn tensors(&self) -> &[(String, Tensor)] {
        &self.shadow
    }

    /// One update after an optimizer step: `e.copy_(decay * e + (1 - decay) * m)` for every
    /// variable, as `ModelEmaV2.update` does (no gradient, no host read).
    pub fn update(&mut self, vs: &VarStore) {
        let vars = vs.variables();
        let keep = 1.0 - self.decay;
        tch::no_grad(|| {
            for (name, e) in &mut self.shadow {
                if let Some(m) = vars.get(name) {
                    let next = &*e * self.decay + m * keep;
                    e.copy_(&next);
                }
            }
        });
    }

    /// Runs `f` with the averages in the model's variables, then puts the model's own values
    /// back (timm evaluates its EMA copy of the model; this needs no second model).
    pub fn with_weights<R>(&self, vs: &VarStore, f: impl FnOnce() -> R) -> R {
        let vars = vs.variables();
        let own: HashMap<&str, Tensor> = tch::no_grad(|| {
            self.shadow
                .iter()
                .filter_map(|(n, e)| {
                    let v = vars.get(n)?;
                    let saved = v.detach().copy();
                    v.shallow_clone().copy_(e);
                    Some((n.as_str(), saved))
                })
                .collect()
        });
        let result = f();
        tch::no_grad(|| {
            for (n, saved) in &own {
                if let Some(v) = vars.get(*n) {
                    v.shallow_clone().copy_(saved);
                }
            }
        });
        result
    }

    /// The averages as a state dict with PyTorch's names (as
    /// [`state_dict`](crate::models::state_dict) writes the model's, `num_batches_tracked`
    /// included): what `ema.safetensors` and `model_ema.safetensors` hold.
    pub fn state_dict(&self) -> Vec<(String, Tensor)> {
        let mut out: Vec<(String, Tensor)> =
            self.shadow.iter().map(|(n, t)| (n.clone(), t.shallow_clone())).collect();
        for (name, _) in self.shadow.iter().filter(|(n, _)| n.ends_with(".running_mean")) {
            let counter = format!("{}.num_batches_tracked", name.trim_end_matches(".running_mean"));
            if !self.shadow.iter().any(|(n, _)| *n == counter) {
                out.push((counter, Tensor::from(0i64)));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Sets the averages from `tensors` (a saved [`state_dict`](Self::state_dict)); every
    /// variable must be there with its shape (`num_batches_tracked` is ignored).
    pub fn load(&mut self, tensors: &[(String, Tensor)]) -> Result<()> {
        let saved: HashMap<&str, &Tensor> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
        tch::no_grad(|| {
            for (name, e) in &mut self.shadow {
                match saved.get(name.as_str()) {
                    Some(t) if t.size() == e.size() => {
                        e.copy_(t);
                    }
                    Some(t) => {
                        return Err(Error::Checkpoint(format!(
                            "EMA weights: {name} has shape {:?}, the model {:?}",
                            t.size(),
                            e.size()
                        )))
                    }
                    None => {
                        return Err(Error::Checkpoint(format!("EMA weights: {name} is missing")))
                    }
                }
            }
            Ok(())
        })
    }
}

/// The average as a part of a run's checkpoints, under the key `ema`: its tensors are
/// [`state_dict`](ModelEma::state_dict) (written as `ema.safetensors`), its value the decay
/// (for the record: a resumed run keeps its own).
impl crate::stateful::Stateful for ModelEma {
    fn state_key(&self) -> String {
        "ema".into()
    }
    fn state_dict(&self) -> Result<crate::stateful::PartState> {
        Ok(crate::stateful::PartState {
            value: serde_json::json!({
                "decay": self.decay, "cadence": self.cadence, "n_averaged": self.n_averaged
            }),
            tensors: ModelEma::state_dict(self),
        })
    }
    /// The tensors, and with a cadence the count of updates since the last copy (a
    /// checkpoint written before the count was kept leaves it as it is).
    fn load_state_dict(&mut self, state: crate::stateful::PartState) -> Result<()> {
        self.load(&state.tensors)?;
        if let Some(n) = state.value.get("n_averaged").and_then(|n| n.as_u64()) {
            self.n_averaged = n;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind};

    #[test]
    fn a_bad_decay_is_an_error_naming_it() {
        let vs = VarStore::new(Device::Cpu);
        for bad in [1.0, -0.1, f64::NAN] {
            let e = ModelEma::new(&vs, bad).unwrap_err().to_string();
            assert!(e.contains("EMA decay"), "{e}");
        }
    }

    #[test]
    fn with_weights_swaps_the_averages_in_and_the_model_back() {
        let vs = VarStore::new(Device::Cpu);
        let w = vs.root().var_copy("w", &Tensor::from_slice(&[1.0f32, 2.0]));
        let mut ema = ModelEma::new(&vs, 0.9).unwrap();
        let _ = tch::no_grad(|| w.shallow_clone().fill_(11.0));
        ema.update(&vs);
        let seen = ema.with_weights(&vs, || Vec::<f32>::try_from(&w).unwrap());
        let expected: Vec<f32> =
            [1.0f32, 2.0].iter().map(|e| (e * 0.9f32) + 11.0 * (1.0 - 0.9) as f32).collect();
        assert_eq!(seen, expected);
        assert_eq!(Vec::<f32>::try_from(&w).unwrap(), [11.0, 11.0], "the model's own values");
        let mut other = ModelEma::new(&vs, 0.5).unwrap();
        other.load(&ema.state_dict()).unwrap();
        assert!(other.tensors()[0].1.equal(&ema.tensors()[0].1));
        let wrong = [("w".to_string(), Tensor::zeros([3], (Kind::Float, Device::Cpu)))];
        assert!(other.load(&wrong).unwrap_err().to_string().contains("shape"));
    }
}
