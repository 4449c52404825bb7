//! The JSON manifest of a checkpoint: where training stands, how to restore it, and the size
//! and CRC32 of every tensor file so that a damaged checkpoint is recognised.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use serde_json::{json, Map, Value};

use crate::train::{OptimizerMeta, RunningMetrics};

/// Version of the layout written by this trainbook; newer versions are refused with a message.
/// Version 2 keeps the run's parts by key (`parts`); version 1 (read too, see
/// [`upgrade_from_v1`]) named the schedule, the loss scaler and the EMA file one by one.
pub const FORMAT_VERSION: u32 = 2;
/// File name of the manifest inside a checkpoint directory (written last).
pub const MANIFEST: &str = "manifest.json";
/// File name of the model's state dict (PyTorch names, safetensors; loadable with
/// `safetensors.torch.load_file` and `model.load_state_dict`).
pub const MODEL_FILE: &str = "model.safetensors";
/// File name of the optimizer's state tensors (`<param>.exp_avg`, `<param>.momentum_buffer`,
/// ...; safetensors).
pub const OPTIMIZER_FILE: &str = "optimizer.safetensors";
/// File name of the EMA of the weights ([`ModelEma`](crate::train::ModelEma)'s state dict), in
/// checkpoints of runs that keep one: the tensors of the part keyed `ema`, named
/// `<key>.safetensors` as every part's are.
pub const EMA_FILE: &str = "ema.safetensors";

/// Size and checksum of one file of a checkpoint, checked when the checkpoint is opened.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Length of the file in bytes.
    pub bytes: u64,
    /// CRC32 (IEEE, as zlib's `crc32`) of the file's bytes.
    pub crc32: u32,
}

/// The contents of `manifest.json`: where training stands, everything besides the tensors that
/// a resume needs, and the size and checksum of each tensor file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Layout version ([`FORMAT_VERSION`] when written by this trainbook).
    pub format_version: u32,
    /// The epoch in progress; `batches_done` of its batches are already trained.
    pub epoch: u64,
    /// Batches of `epoch` already trained (0 at an epoch boundary).
    pub batches_done: u64,
    /// Optimizer steps since the start of training.
    pub global_step: u64,
    /// Per-sample metrics of the partial epoch (so a resumed epoch reports the same summary).
    pub epoch_metrics: RunningMetrics,
    /// Number of ranks that wrote the checkpoint (one RNG state each).
    pub world_size: usize,
    /// Seed of the sampler/shuffle and of the augmentations.
    pub seed: u64,
    /// Every rank's libtorch CPU generator state, in rank order, hex-encoded.
    pub rng_states: Vec<String>,
    /// Every rank's CUDA generator state (of the rank's GPU), in rank order, hex-encoded;
    /// empty for CPU runs and in older checkpoints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_rng_states: Vec<String>,
    /// Best value of the monitored metric so far.
    pub best_metric: Option<f64>,
    /// The optimizer's kind, learning rate and per-parameter step counts (its tensors are in
    /// [`OPTIMIZER_FILE`]).
    pub optimizer: OptimizerMeta,
    /// The run's configuration (command-line flags, hyper-parameters), for the record.
    pub config: serde_json::Value,
    /// The run's other parts by their state key ([`Stateful`](crate::Stateful)): the LR
    /// schedule (`schedule`), float16's loss scaler (`grad_scaler`), early stopping, the EMA of
    /// the weights (`ema`), a part of the user's own.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parts: BTreeMap<String, PartEntry>,
    /// Every tensor file of the checkpoint by name, with its size and CRC32.
    pub files: BTreeMap<String, FileEntry>,
}

/// One part's entry in the manifest: its small state, and the file of its tensors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PartEntry {
    /// The part's serde value ([`PartState::value`](crate::PartState::value)).
    #[serde(default)]
    pub value: Value,
    /// The file holding its tensors (`<key>.safetensors`, listed in [`Manifest::files`] with
    /// its checksum); `None` for a part without tensors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensors: Option<String>,
}

/// Rewrites a format-1 manifest (as parsed JSON) into the layout of format 2, in place: its
/// `scheduler`, `grad_scaler` and `parts.early_stopping` become the parts `schedule`,
/// `grad_scaler` and `early_stopping`, and its [`EMA_FILE`] the tensors of the part `ema`.
/// `format_version` stays 1, so the manifest still says what wrote it.
pub fn upgrade_from_v1(manifest: &mut Map<String, Value>) {
    let mut parts = Map::new();
    let mut keep = |key: &str, value: Option<Value>| {
        if let Some(v) = value.filter(|v| !v.is_null()) {
            parts.insert(key.to_string(), json!({ "value": v }));
        }
    };
    keep("schedule", manifest.remove("scheduler"));
    keep("grad_scaler", manifest.remove("grad_scaler"));
    if let Some(Value::Object(named)) = manifest.remove("parts") {
        named.into_iter().for_each(|(k, v)| keep(&k, Some(v)));
    }
    if manifest.get("files").and_then(|f| f.get(EMA_FILE)).is_some() {
        parts.insert("ema".into(), json!({ "tensors": EMA_FILE }));
    }
    manifest.insert("parts".into(), Value::Object(parts));
}

pub(crate) fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn from_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok()).collect()
}
