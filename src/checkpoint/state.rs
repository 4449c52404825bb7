//! What a checkpoint captures and when it is written: the [`Policy`], the borrowed
//! [`TrainState`] a save reads, and the [`ResumePoint`] a restore hands back.
use tch::nn::VarStore;

use crate::train::{GradScalerState, Mode, ModelEma, Optimizer, RunningMetrics};
use std::path::PathBuf;

/// When to write checkpoints. The default writes `step-*` after every epoch, keeps the last
/// 2, and keeps `best/` for the highest monitored metric (accuracy).
#[derive(Clone, Debug)]
pub struct Policy {
    /// Write `step-*` at the end of every N-th epoch (default `Some(1)`; `None` or 0: never).
    pub every_epochs: Option<u64>,
    /// Write `step-*` every N optimizer steps, mid-epoch too (default `None`: never).
    pub every_steps: Option<u64>,
    /// How many `step-*` checkpoints to keep; older ones are deleted (default 2, at least 1).
    pub keep_last: usize,
    /// Keep `best/` by the monitored metric: [`Mode::Max`] for accuracy (the default),
    /// [`Mode::Min`] for a loss; `None`: no `best/`.
    pub best: Option<Mode>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy { every_epochs: Some(1), every_steps: None, keep_last: 2, best: Some(Mode::Max) }
    }
}

/// Borrowed view of the training state a checkpoint captures (built by the caller at each
/// save; [`Checkpointer::after_step`](super::Checkpointer::after_step) builds it only when it
/// saves).
pub struct TrainState<'a> {
    /// The model's variables, saved as `model.safetensors` with PyTorch's names.
    pub vs: &'a VarStore,
    /// The optimizer, whose state goes to `optimizer.safetensors` (its step counts and learning
    /// rate to the manifest).
    pub optimizer: &'a Optimizer,
    /// The LR scheduler's state in its serde form (`serde_json::to_value(&scheduler)`), or
    /// `Value::Null` without one; handed back in [`ResumePoint::scheduler`].
    pub scheduler: serde_json::Value,
    /// The epoch in progress, 0-based (at the end of an epoch: the next one).
    pub epoch: u64,
    /// Batches of `epoch` already trained (0 at an epoch boundary).
    pub batches_done: u64,
    /// This rank's running sums for the partial epoch; the checkpoint stores their sum over
    /// all ranks.
    pub epoch_metrics: RunningMetrics,
    /// The run's seed (sampler shuffle and augmentations), recorded in the manifest.
    pub seed: u64,
    /// The run's configuration (flags, hyper-parameters), recorded in the manifest as is.
    pub config: serde_json::Value,
    /// The loss scaler's state when training in float16 with a `GradScaler`.
    pub grad_scaler: Option<GradScalerState>,
    /// The states of the run's other parts by name (`fit`'s early stopping, ...), in their
    /// serde form; `Value::Null` without any. Handed back in [`ResumePoint::parts`].
    pub parts: serde_json::Value,
    /// The moving average of the weights, saved as [`EMA_FILE`](super::EMA_FILE) when there is
    /// one (read it back with [`read_tensors_file`](super::read_tensors_file)).
    pub ema: Option<&'a ModelEma>,
}

/// Where to continue after [`Checkpointer::restore`](super::Checkpointer::restore).
#[derive(Clone, Debug, PartialEq)]
pub struct ResumePoint {
    /// The epoch to continue (the one in progress when the checkpoint was written).
    pub epoch: u64,
    /// Batches of `epoch` already trained: skip them (`DataLoader::skip_batches`).
    pub batches_done: u64,
    /// Optimizer steps taken since the start of training.
    pub global_step: u64,
    /// Running sums of the partial epoch, over all ranks, on rank 0; zero on the other ranks
    /// (so that summing over ranks again gives the right total).
    pub epoch_metrics: RunningMetrics,
    /// The LR scheduler's state as saved in [`TrainState::scheduler`]
    /// (`serde_json::from_value` it back).
    pub scheduler: serde_json::Value,
    /// Best value of the monitored metric so far (`None` before the first evaluation).
    pub best_metric: Option<f64>,
    /// The checkpoint directory restored from.
    pub dir: PathBuf,
    /// The loss scaler's state, if the checkpoint holds one.
    pub grad_scaler: Option<GradScalerState>,
    /// [`TrainState::parts`] as saved (`Value::Null` in older checkpoints).
    pub parts: serde_json::Value,
}

impl<'a> TrainState<'a> {
    /// The state at the start of `epoch` (0-based; after finishing epoch `e`, pass `e + 1`):
    /// model and optimizer, no scheduler, no partial-epoch metrics, seed 0, no config, no loss
    /// scaler, no parts' states, no EMA. Set the other fields with struct update syntax when a run has them.
    ///
    /// ```
    /// # use trainbook::checkpoint::TrainState;
    /// # use trainbook::train::Optimizer;
    /// let vs = tch::nn::VarStore::new(tch::Device::Cpu);
    /// let opt = Optimizer::adam(&vs, 1e-3);
    /// let state = TrainState { seed: 7, ..TrainState::new(&vs, &opt, 3) };
    /// assert_eq!((state.epoch, state.batches_done, state.seed), (3, 0, 7));
    /// ```
    pub fn new(vs: &'a VarStore, optimizer: &'a Optimizer, epoch: u64) -> TrainState<'a> {
        TrainState {
            vs,
            optimizer,
            scheduler: serde_json::Value::Null,
            epoch,
            batches_done: 0,
            epoch_metrics: RunningMetrics::default(),
            seed: 0,
            config: serde_json::Value::Null,
            grad_scaler: None,
            parts: serde_json::Value::Null,
            ema: None,
        }
    }
}
