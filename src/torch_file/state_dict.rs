//! The state dict inside a `torch.save` file: a bare state dict, as torchvision's hub files
//! hold, or the one inside a checkpoint's dict, with DistributedDataParallel's `module.` prefix
//! removed. Loading it into a model's `VarStore` is `trainbook::models`' part
//! (`load_state_dict_file`), which builds on this file format, never the other way round.
use std::path::Path;

use tch::Tensor;

use super::TorchValue;
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
