//! The JSON manifest of a checkpoint: where training stands, how to restore it, and the size
//! and CRC32 of every tensor file so that a damaged checkpoint is recognised.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::train::{GradScalerState, OptimizerMeta, RunningMetrics};

/// Version of the layout written by this trainbook; newer versions are refused with a message.
pub const FORMAT_VERSION: u32 = 1;
/// File name of the manifest inside a checkpoint directory (written last).
pub const MANIFEST: &str = "manifest.json";
/// File name of the model's state dict (PyTorch names, safetensors; loadable with
/// `safetensors.torch.load_file` and `model.load_state_dict`).
pub const MODEL_FILE: &str = "model.safetensors";
/// File name of the optimizer's state tensors (`<param>.exp_avg`, `<param>.momentum_buffer`,
/// ...; safetensors).
pub const OPTIMIZER_FILE: &str = "optimizer.safetensors";
/// File name of the EMA of the weights ([`ModelEma`](crate::train::ModelEma)'s state dict), in
/// checkpoints of runs that keep one.
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
    /// The LR scheduler's state (its serde form).
    pub scheduler: serde_json::Value,
    /// The run's configuration (command-line flags, hyper-parameters), for the record.
    pub config: serde_json::Value,
    /// float16 training's loss scale and growth tracker (absent otherwise, and in older
    /// checkpoints).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grad_scaler: Option<GradScalerState>,
    /// The states of the run's other parts by name (early stopping, ...); absent when there
    /// are none, and in older checkpoints.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub parts: serde_json::Value,
    /// Every tensor file of the checkpoint by name, with its size and CRC32.
    pub files: BTreeMap<String, FileEntry>,
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
