//! What a checkpoint captures and when it is written: the [`Policy`], the borrowed
//! [`TrainState`] a save reads, and the [`ResumePoint`] a restore hands back.
use tch::nn::VarStore;

use crate::stateful::{check_state_key, PartState, Stateful};
use crate::train::{Mode, Optimizer, RunningMetrics};
use crate::{Error, Result};
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
    /// The states of the run's other parts (the schedule, the loss scaler, early stopping, the
    /// EMA, a part of your own) by their [`Stateful::state_key`], as
    /// [`with_parts`](Self::with_parts) takes them; put back with
    /// [`restore_parts`](super::restore_parts).
    pub parts: Vec<(String, PartState)>,
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
    /// Best value of the monitored metric so far (`None` before the first evaluation).
    pub best_metric: Option<f64>,
    /// The checkpoint directory restored from.
    pub dir: PathBuf,
}

impl<'a> TrainState<'a> {
    /// The state at the start of `epoch` (0-based; after finishing epoch `e`, pass `e + 1`):
    /// model and optimizer, no partial-epoch metrics, seed 0, no config, no other parts. Set
    /// the other fields with struct update syntax, and the parts with
    /// [`with_parts`](Self::with_parts), when a run has them.
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
            epoch,
            batches_done: 0,
            epoch_metrics: RunningMetrics::default(),
            seed: 0,
            config: serde_json::Value::Null,
            parts: Vec::new(),
        }
    }

    /// Adds the current state of each of `parts` (`state_dict`, under its `state_key`).
    /// Errors: a part's own error, and [`Error::InvalidArgument`] for a key that is not a
    /// valid name ([`check_state_key`]) or that two parts share.
    ///
    /// ```
    /// # use trainbook::checkpoint::TrainState;
    /// # use trainbook::train::{GradScaler, Optimizer};
    /// let vs = tch::nn::VarStore::new(tch::Device::Cpu);
    /// let opt = Optimizer::adam(&vs, 1e-3);
    /// let scaler = GradScaler::new(tch::Device::Cpu);
    /// let state = TrainState::new(&vs, &opt, 0).with_parts(&[&scaler])?;
    /// assert_eq!(state.parts[0].0, "grad_scaler");
    /// # Ok::<(), trainbook::Error>(())
    /// ```
    pub fn with_parts(mut self, parts: &[&dyn Stateful]) -> Result<TrainState<'a>> {
        for part in parts {
            let key = part.state_key();
            check_state_key(&key)?;
            if self.parts.iter().any(|(k, _)| *k == key) {
                return Err(Error::InvalidArgument(format!(
                    "two parts of the run have the state key {key:?}"
                )));
            }
            let state = part.state_dict()?;
            self.parts.push((key, state));
        }
        Ok(self)
    }
}
