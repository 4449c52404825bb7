//! The run's parts in a checkpoint: their states go into the manifest by key (the serde value)
//! and into `<key>.safetensors` (the tensors), and come back into any list of
//! [`Stateful`] parts with [`restore_parts`]. The checkpoint never names what a part is.
use tch::Tensor;

use super::manifest::{Manifest, PartEntry};
use super::snapshot;
use super::store::{read_tensors_file, Checkpoint};
use crate::stateful::{PartState, Stateful};
use crate::{Error, Result};

/// The tensor files of a checkpoint's parts: (file name, tensors on the host).
pub(super) type PartFiles = Vec<(String, Vec<(String, Tensor)>)>;

/// Enters `parts` into the manifest, and copies their tensors to the host (so a background
/// write does not see later updates) with the file each goes to.
pub(super) fn snapshot(
    mut manifest: Manifest,
    parts: &[(String, PartState)],
) -> (Manifest, PartFiles) {
    let mut files = Vec::new();
    for (key, part) in parts {
        let file = (!part.tensors.is_empty()).then(|| format!("{key}.safetensors"));
        if let Some(file) = &file {
            let tensors = part.tensors.iter().map(|(n, t)| (n.clone(), t.shallow_clone()));
            files.push((file.clone(), snapshot::on_host(tensors.collect(), true)));
        }
        manifest.parts.insert(key.clone(), PartEntry { value: part.value.clone(), tensors: file });
    }
    (manifest, files)
}

/// Puts each of `parts` back from `ckpt` by its [`state_key`](Stateful::state_key) and returns
/// the keys the checkpoint holds no state for (those parts are left as they are: a part the
/// run that wrote the checkpoint did not have starts fresh). Parts of the checkpoint that are
/// not in `parts` are ignored. Errors: [`Error::Checkpoint`] naming the checkpoint and the part
/// whose state does not load (its file missing, a shape, an unreadable value).
///
/// ```no_run
/// # fn main() -> trainbook::Result<()> {
/// use trainbook::checkpoint::{open_checkpoint, restore_parts};
/// use trainbook::train::GradScaler;
/// let ckpt = open_checkpoint("runs/fit/checkpoints/step-000000100".as_ref())?;
/// let mut scaler = GradScaler::new(tch::Device::Cpu);
/// let missing = restore_parts(&ckpt, &mut [&mut scaler])?;
/// println!("fresh: {missing:?}");
/// # Ok(()) }
/// ```
pub fn restore_parts(ckpt: &Checkpoint, parts: &mut [&mut dyn Stateful]) -> Result<Vec<String>> {
    let mut missing = Vec::new();
    for part in parts.iter_mut() {
        let key = part.state_key();
        let Some(entry) = ckpt.manifest.parts.get(&key) else {
            missing.push(key);
            continue;
        };
        let bad = |why: String| {
            Error::Checkpoint(format!("checkpoint {}, part `{key}`: {why}", ckpt.dir.display()))
        };
        let tensors = match &entry.tensors {
            None => Vec::new(),
            Some(file) => read_tensors_file(ckpt, file)?
                .ok_or_else(|| bad(format!("its tensor file {file} is not in the checkpoint")))?,
        };
        part.load_state_dict(PartState { value: entry.value.clone(), tensors })
            .map_err(|e| bad(e.to_string()))?;
    }
    Ok(missing)
}
