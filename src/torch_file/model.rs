//! A model's weights in `torch.save` files: the state dict inside a file (a bare state dict as
//! torchvision's hub files hold, or the one inside a checkpoint's dict), loaded into a
//! [`VarStore`] with the checks of [`crate::models::load_state_dict`], and the model's
//! state dict written as `torch.save(model.state_dict(), path)` writes it.
use std::path::Path;

use tch::nn::VarStore;
use tch::{Device, Tensor};

use super::TorchValue;
use crate::models::{load_state_dict, state_dict, LoadReport};
use crate::{Error, Result};

/// A state dict's entries, in order: names and tensors.
pub type NamedTensors = Vec<(String, Tensor)>;

/// The keys under which checkpoints keep a model's state dict, tried in this order: the
/// course's and PyTorch's tutorials' `model_state_dict`, Lightning's `state_dict`, torchvision's
/// `references/classification/train.py`'s `model`.
pub const STATE_DICT_KEYS: [&str; 3] = ["model_state_dict", "state_dict", "model"];

/// The state dict in a loaded file: the file's value itself when it is a dict of tensors, else
/// the dict of tensors under the first of [`STATE_DICT_KEYS`] it holds (which key, in the
/// first element). A `module.` prefix on every name (the state dict of a model still wrapped in
/// DistributedDataParallel) is removed, as
/// `torch.nn.modules.utils.consume_prefix_in_state_dict_if_present` does. Errors
/// ([`Error::Parse`] naming `path`): no such dict, with the keys the file has.
pub fn state_dict_of(
    value: &TorchValue,
    path: &Path,
) -> Result<(Option<&'static str>, NamedTensors)> {
    let (key, mut tensors) = match value.as_tensor_dict() {
        Some(t) => (None, t),
        None => STATE_DICT_KEYS
            .iter()
            .find_map(|k| value.get(k).and_then(TorchValue::as_tensor_dict).map(|t| (Some(*k), t)))
            .ok_or_else(|| {
                Error::parse(
                    path,
                    "torch.save file",
                    format!(
                        "no state dict: the file holds a {} with keys {:?}, neither a dict of \
                         tensors nor one under {:?}",
                        value.kind_name(),
                        value.keys(),
                        STATE_DICT_KEYS
                    ),
                )
            })?,
    };
    if !tensors.is_empty() && tensors.iter().all(|(n, _)| n.starts_with("module.")) {
        for (n, _) in &mut tensors {
            n.drain(.."module.".len());
        }
    }
    Ok((key, tensors))
}

/// Loads the state dict of a `torch.save` file into the model (see [`state_dict_of`] for where
/// it is looked for, and [`load_state_dict`] for `strict` and the checks). Errors name the file.
///
/// ```no_run
/// use tch::nn::VarStore;
/// use trainbook::models::{resnet34, HeadKind};
/// # fn main() -> trainbook::Result<()> {
/// let mut vs = VarStore::new(tch::Device::Cpu);
/// let net = resnet34(&vs.root(), 1000, HeadKind::Linear);
/// // torchvision's file, as `torchvision.models.resnet34(weights="IMAGENET1K_V1")` caches it.
/// let report = trainbook::torch_file::load_state_dict_file(
///     &mut vs,
///     "/home/me/.cache/torch/hub/checkpoints/resnet34-b627a593.pth",
///     true,
/// )?;
/// assert!(report.missing.is_empty());
/// # Ok(()) }
/// ```
pub fn load_state_dict_file(
    vs: &mut VarStore,
    path: impl AsRef<Path>,
    strict: bool,
) -> Result<LoadReport> {
    let path = path.as_ref();
    let value = super::load(path)?;
    let (_, tensors) = state_dict_of(&value, path)?;
    load_state_dict(vs, &tensors, strict).map_err(|e| match e {
        Error::InvalidArgument(m) => Error::InvalidArgument(format!("{}: {m}", path.display())),
        other => other,
    })
}

/// Writes the model's state dict ([`state_dict`]: parameters, BatchNorm statistics and
/// `num_batches_tracked`, on the CPU) as `torch.save(model.state_dict(), path)` does, so that a
/// PyTorch user loads it with `model.load_state_dict(torch.load(path))`.
pub fn save_state_dict(vs: &VarStore, path: impl AsRef<Path>) -> Result<()> {
    let cpu: Vec<(String, Tensor)> =
        state_dict(vs).into_iter().map(|(n, t)| (n, t.to_device(Device::Cpu))).collect();
    super::save(path, &TorchValue::from_tensors(&cpu))
}
