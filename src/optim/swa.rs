//! Stochastic weight averaging as `torch.optim.swa_utils` has it: [`SwaModel`] is
//! `AveragedModel`'s equal average of the weights (parameters averaged, buffers copied from the
//! model, `use_buffers=False`), [`update_bn`] recomputes BatchNorm's running statistics for
//! the averaged weights with one pass over the training data, and
//! [`SWALR`](crate::train::SWALR) anneals the learning rate. On the CPU each computes what torch
//! computes (`tests/training/swa.rs` against torch's own classes): `AveragedModel` adds
//! `(current - average) / (n + 1)`, `update_bn` resets the statistics and runs the model in
//! training mode with momentum `1 / k` at the k-th batch (BatchNorm's `momentum=None`). On a GPU
//! torch lerps the averages with `torch._foreach_lerp_` by the float32 weight `1 / (n + 1)`;
//! here each is lerped on its own by that weight (not tested: no GPU here).
use std::collections::HashMap;

use tch::nn::{ModuleT, VarStore};
use tch::{Device, Kind, Tensor};

use crate::data::{DataLoader, Dataset};
use crate::{Error, Result};

/// `torch.optim.swa_utils.AveragedModel(model)` with its default average: a copy of every
/// variable, and [`update_parameters`](Self::update_parameters) after each SWA epoch (or step)
/// makes each parameter the mean of the weights seen so far, and each buffer the model's.
/// Evaluate or save the average by putting it into the model ([`copy_to`](Self::copy_to)) after
/// [`update_bn`].
///
/// ```
/// use tch::{nn::VarStore, Device, Tensor};
/// use trainbook::train::SwaModel;
/// let vs = VarStore::new(Device::Cpu);
/// let w = vs.root().var_copy("w", &Tensor::from_slice(&[1.0f32]));
/// let mut swa = SwaModel::new(&vs);
/// for value in [1.0, 2.0, 6.0] {
///     let _ = tch::no_grad(|| w.shallow_clone().fill_(value)); // the model after an epoch
///     swa.update_parameters(&vs)?;
/// }
/// assert_eq!((swa.n_averaged(), f64::try_from(&swa.tensors()[0].1)?), (3, 3.0));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct SwaModel {
    /// The averages and buffer copies by variable name (sorted), and whether each is a
    /// parameter.
    shadow: Vec<(String, Tensor, bool)>,
    n_averaged: i64,
}

impl std::fmt::Debug for SwaModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.shadow.len();
        write!(f, "SwaModel {{ n_averaged: {}, {n} tensors }}", self.n_averaged)
    }
}

impl SwaModel {
    /// A copy of `vs`'s variables (torch deep-copies the model), nothing averaged yet. The
    /// parameters are its trainable variables (frozen ones too); the rest are buffers.
    pub fn new(vs: &VarStore) -> SwaModel {
        let params: Vec<Tensor> = vs.trainable_variables();
        let is_param = |t: &Tensor| params.iter().any(|p| p.data_ptr() == t.data_ptr());
        let mut shadow: Vec<(String, Tensor, bool)> = tch::no_grad(|| {
            vs.variables()
                .into_iter()
                .map(|(n, t)| {
                    let param = is_param(&t);
                    (n, t.detach().copy(), param)
                })
                .collect()
        });
        shadow.sort_by(|a, b| a.0.cmp(&b.0));
        SwaModel { shadow, n_averaged: 0 }
    }

    /// Weights averaged so far (torch's `n_averaged`).
    pub fn n_averaged(&self) -> i64 {
        self.n_averaged
    }

    /// The averaged parameters and copied buffers, by variable name (sorted).
    pub fn tensors(&self) -> Vec<(String, Tensor)> {
        self.shadow.iter().map(|(n, t, _)| (n.clone(), t.shallow_clone())).collect()
    }

    /// `update_parameters(model)`: the first call copies the parameters; later ones move each
    /// average towards the model's parameter by `1 / (n + 1)`; every buffer becomes the model's.
    /// Errors name a variable of the model missing here or of another shape.
    pub fn update_parameters(&mut self, vs: &VarStore) -> Result<()> {
        let vars = vs.variables();
        let n = self.n_averaged;
        tch::no_grad(|| -> Result<()> {
            for (name, avg, param) in &mut self.shadow {
                let model = vars.get(name.as_str()).ok_or_else(|| {
                    Error::InvalidArgument(format!("SWA: the model has no variable {name}"))
                })?;
                if model.size() != avg.size() {
                    return Err(Error::InvalidArgument(format!(
                        "SWA: {name} is {:?} in the model, {:?} in the average",
                        model.size(),
                        avg.size()
                    )));
                }
                let model = model.detach().to_device(avg.device());
                if !*param || n == 0 {
                    avg.copy_(&model);
                } else if avg.device().is_cuda() && avg.is_floating_point() {
                    // torch's foreach path on GPUs: lerp by the float32 weight 1 / (n + 1).
                    let weight = f64::from(1.0f32 / (n + 1) as f32);
                    let _ = avg.lerp_(&model, weight);
                } else {
                    let next =
                        &*avg + (model - &*avg) / Tensor::from(n + 1).to_device(avg.device());
                    avg.copy_(&next);
                }
            }
            Ok(())
        })?;
        self.n_averaged += 1;
        Ok(())
    }

    /// Puts the averages (and buffers) into `vs`'s variables: the model becomes the average
    /// (run [`update_bn`] on it next, then evaluate or save it).
    pub fn copy_to(&self, vs: &VarStore) -> Result<()> {
        let vars = vs.variables();
        tch::no_grad(|| {
            for (name, avg, _) in &self.shadow {
                let var = vars.get(name.as_str()).ok_or_else(|| {
                    Error::InvalidArgument(format!("SWA: the model has no variable {name}"))
                })?;
                var.shallow_clone().copy_(avg);
            }
            Ok(())
        })
    }

    /// torch's `AveragedModel.state_dict()`: `module.<name>` for every variable and
    /// `n_averaged` (int64), to save with [`torch_file`](crate::torch_file) or safetensors.
    pub fn state_dict(&self) -> Vec<(String, Tensor)> {
        let mut out: Vec<(String, Tensor)> = self
            .shadow
            .iter()
            .map(|(n, t, _)| (format!("module.{n}"), t.shallow_clone()))
            .collect();
        out.push(("n_averaged".into(), Tensor::from(self.n_averaged)));
        out
    }

    /// Sets the averages and the count from a [`state_dict`](Self::state_dict); errors name a
    /// missing tensor or a shape that differs.
    pub fn load_state_dict(&mut self, tensors: &[(String, Tensor)]) -> Result<()> {
        let saved: HashMap<&str, &Tensor> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
        let missing = |name: &str| Error::InvalidArgument(format!("SWA state: no {name}"));
        let n = saved.get("n_averaged").ok_or_else(|| missing("n_averaged"))?;
        let n = n.to_kind(Kind::Int64).int64_value(&[]);
        tch::no_grad(|| -> Result<()> {
            for (name, avg, _) in &mut self.shadow {
                let key = format!("module.{name}");
                let t = saved.get(key.as_str()).ok_or_else(|| missing(&key))?;
                if t.size() != avg.size() {
                    return Err(Error::InvalidArgument(format!(
                        "SWA state: {key} is {:?}, the model's {:?}",
                        t.size(),
                        avg.size()
                    )));
                }
                avg.copy_(t);
            }
            Ok(())
        })?;
        self.n_averaged = n;
        Ok(())
    }
}

/// `torch.optim.swa_utils.update_bn(loader, model, device)`: every BatchNorm's running mean
/// and variance reset (0 and 1, `num_batches_tracked` 0 where the model has it), then one pass
/// over `loader`'s images on `device` in training mode without gradients, each
/// [`BatchNorm2d`](crate::models::BatchNorm2d) averaging the batches equally (momentum `1 / k`
/// at the k-th); the model's BatchNorm layers are found by their variables' names
/// (`running_mean`, `running_var`). A model without them is left alone, as torch does.
pub fn update_bn<D: Dataset + 'static>(
    loader: &mut DataLoader<D>,
    vs: &VarStore,
    model: &dyn ModuleT,
    device: Device,
) -> Result<()> {
    let vars = vs.variables();
    let stats: Vec<(&String, &Tensor)> = vars
        .iter()
        .filter(|(n, _)| n.ends_with("running_mean") || n.ends_with("running_var"))
        .collect();
    if stats.is_empty() {
        return Ok(());
    }
    tch::no_grad(|| {
        for (name, t) in &stats {
            let mut t = t.shallow_clone();
            let _ = if name.ends_with("running_mean") { t.zero_() } else { t.fill_(1.0) };
        }
        for (name, t) in &vars {
            if name.ends_with("num_batches_tracked") {
                let _ = t.shallow_clone().zero_();
            }
        }
    });
    let mut k = 0u64;
    for batch in loader.iter() {
        let images = batch?.images.to_device(device);
        k += 1;
        let momentum = 1.0 / k as f64;
        crate::models::with_momentum(momentum, || {
            tch::no_grad(|| drop(model.forward_t(&images, true)));
        });
    }
    tch::no_grad(|| {
        for (name, t) in &vars {
            if name.ends_with("num_batches_tracked") {
                let _ = t.shallow_clone().fill_(k as i64);
            }
        }
    });
    Ok(())
}
