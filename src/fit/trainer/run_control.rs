//! The run-control and debugging switches of [`Trainer`]: the step logs, the weight trail,
//! batch limits, `max_steps`, `val_every_steps`, `overfit_batches`, anomaly detection and
//! `fast_dev_run` (Lightning's names).
use tch::Device;

use super::{batch_device, Trainer};
use crate::data::{DataLoader, Dataset};
use crate::dist::Dist;
use crate::fit::FitConfig;
use crate::{Error, Result, WithPath};

/// Run controls: step logs and the weight trail, limits on the batches and steps, mid-epoch
/// validation, overfitting a few batches, a debug run, anomaly detection, and taking the run's
/// settings off the loaders and giving them back.
impl Trainer<'_> {
    /// Logs every optimizer step to `out/steps.csv` and TensorBoard (`out/tb/`) on rank 0;
    /// default `true`. See [`FitConfig::step_log`].
    pub fn step_log(mut self, on: bool) -> Self {
        self.cfg.step_log = on;
        self
    }

    /// Writes the weight trail every `every_steps` optimizer steps (`out/weight_trail.jsonl`,
    /// rank 0): checksums of the model's tensors and of the optimizer's state, which
    /// `trainbook-diff RUN_A RUN_B` compares to name the first step and tensor at which two runs
    /// differ. See [`FitConfig::weight_trail`] and [`crate::trail`].
    pub fn weight_trail(mut self, every_steps: u64) -> Self {
        self.cfg.weight_trail = Some(every_steps);
        self
    }

    /// Trains on at most `batches` batches per epoch and validates on at most `val_batches`
    /// (Lightning's `limit_train_batches` and `limit_val_batches` as counts), the first of each
    /// epoch's order: a quick look at a run, or a debug run. The loaders get the limits for the
    /// run only ([`DataLoader::limit_batches`](crate::data::DataLoader::limit_batches)).
    pub fn limit_batches(mut self, batches: Option<usize>, val_batches: Option<usize>) -> Self {
        self.cfg.limit_train_batches = batches;
        self.cfg.limit_val_batches = val_batches;
        self
    }

    /// Ends the run after `steps` optimizer steps in all, even mid-epoch (Lightning's
    /// `max_steps`): that epoch trains only the batches of the missing steps, is validated and
    /// checkpointed, and the run ends; `epochs` still caps it. 0 is an error of `fit`.
    pub fn max_steps(mut self, steps: Option<u64>) -> Self {
        self.cfg.max_steps = steps;
        self
    }

    /// Stops the run with a checkpoint after the optimizer step at which `limit` has passed
    /// since training started (Lightning's `max_time`; the report's reason is `"max_time"`,
    /// and resume continues the run). See [`FitConfig::max_time`].
    pub fn max_time(mut self, limit: Option<std::time::Duration>) -> Self {
        self.cfg.max_time = limit;
        self
    }

    /// Also validates after every `steps` optimizer steps in the middle of an epoch
    /// (Lightning's `val_check_interval=steps`), over the whole validation set and all ranks:
    /// a line on rank 0, `OUT/val_steps.jsonl`, `val_step/*` in TensorBoard and the callbacks'
    /// `on_step_validation`. The epoch's own validation stays (it alone judges `best/`, early
    /// stopping and the plateau schedule); a step that ends an epoch is not validated twice.
    /// 0 is an error of `fit`.
    pub fn val_every_steps(mut self, steps: Option<u64>) -> Self {
        self.cfg.val_every_steps = steps;
        self
    }

    /// Trains and validates on the first `batches` batches of their loaders every epoch, with
    /// the loaders' shuffling off for the run (Lightning's `overfit_batches` as a count): a model
    /// that cannot overfit a few batches has a bug. It takes the place of
    /// [`limit_batches`](Self::limit_batches). 0 is an error of `fit`.
    pub fn overfit_batches(mut self, batches: Option<usize>) -> Self {
        self.cfg.overfit_batches = batches;
        self
    }

    /// Runs with autograd's anomaly detection on (torch's `detect_anomaly`, Lightning's
    /// `detect_anomaly=True`): the first backward function that returns a NaN stops the run with
    /// libtorch's message naming it, instead of the epoch's end finding the loss not finite.
    /// Slower (each backward function's output is checked on the host). The switch is
    /// process-wide while the run lasts, then back as it was.
    pub fn detect_anomaly(mut self, on: bool) -> Self {
        self.cfg.detect_anomaly = on;
        self
    }

    /// A debug run (Lightning's `fast_dev_run`): one epoch of the first `batches` training and
    /// validation batches, in a scratch folder that is removed afterwards, so nothing is
    /// written where [`out`](Self::out) points and nothing there is resumed; no checkpoints,
    /// step logs, weight trail or early stopping. Your callbacks still run. 0 is an error of
    /// `fit`.
    pub fn fast_dev_run(mut self, batches: Option<usize>) -> Self {
        self.cfg.fast_dev_run = batches;
        self
    }
}

/// What `fit` changes on the caller's loaders for its run (where they deliver, whether they
/// shuffle), to give back after it.
pub(super) struct Lent {
    devices: (Device, Device),
    shuffled: (bool, bool),
    sharded: (bool, bool),
}

impl Lent {
    /// Sets the loaders up for a run on `device` (pinned batches with `pin_memory`), their
    /// shuffle off with `in_order`, and with `shard` (several ranks, `use_distributed_sampler`)
    /// a loader in its own order sharded over the ranks, which rank 0 says.
    pub fn take<A: Dataset + 'static, B: Dataset + 'static>(
        (train, val): (&mut DataLoader<A>, &mut DataLoader<B>),
        (device, pin_memory): (Device, bool),
        in_order: bool,
        shard: Option<&Dist>,
    ) -> Lent {
        let mut lent = Lent {
            devices: (train.batch_device(), val.batch_device()),
            shuffled: (train.is_shuffled(), val.is_shuffled()),
            sharded: (false, false),
        };
        train.set_device(batch_device(device, pin_memory, lent.devices.0));
        val.set_device(batch_device(device, pin_memory, lent.devices.1));
        if in_order {
            train.set_shuffle(false);
            val.set_shuffle(false);
        }
        if let Some(dist) = shard {
            let samples = (train.num_samples(), val.num_samples());
            lent.sharded = (train.shard_own_order(dist), val.shard_own_order(dist));
            for (sharded, (which, does), n) in [
                (lent.sharded.0, ("training", "train"), samples.0),
                (lent.sharded.1, ("validation", "validate"), samples.1),
            ] {
                if sharded {
                    dist.println(format!(
                        "fit: the {which} loader was not sharded, so each of the {} ranks would \
                         {does} on all {n} samples; this run shards it as .distributed(&dist) \
                         does (Trainer::use_distributed_sampler(false) keeps it as it is)",
                        dist.world_size()
                    ));
                }
            }
        }
        lent
    }

    /// The loaders as they were before [`take`](Self::take).
    pub fn give_back<A: Dataset + 'static, B: Dataset + 'static>(
        self,
        (train, val): (&mut DataLoader<A>, &mut DataLoader<B>),
    ) {
        train.set_device(self.devices.0);
        val.set_device(self.devices.1);
        if self.sharded.0 {
            train.unshard(self.shuffled.0);
        }
        if self.sharded.1 {
            val.unshard(self.shuffled.1);
        }
        train.set_shuffle(self.shuffled.0);
        val.set_shuffle(self.shuffled.1);
    }
}

/// The settings of an `overfit_batches` run: both batch limits set to its count.
pub(super) fn overfit(cfg: &FitConfig) -> Option<FitConfig> {
    let n = cfg.overfit_batches?;
    let mut run = cfg.clone();
    (run.limit_train_batches, run.limit_val_batches) = (Some(n), Some(n));
    Some(run)
}

/// The settings of a `fast_dev_run` of `batches` batches, and its scratch folder.
pub(super) fn dev_run(cfg: &FitConfig, batches: usize) -> Result<(FitConfig, tempfile::TempDir)> {
    if batches == 0 {
        return Err(Error::InvalidArgument("fast_dev_run: 0 batches to train on".into()));
    }
    let dir = tempfile::Builder::new()
        .prefix("trainbook-dev-run-")
        .tempdir()
        .with_path(std::env::temp_dir())?;
    let mut dev = cfg.clone();
    (dev.epochs, dev.out, dev.resume) = (1, dir.path().to_path_buf(), false);
    (dev.limit_train_batches, dev.limit_val_batches) = (Some(batches), Some(batches));
    let never = crate::checkpoint::Policy {
        every_epochs: None,
        every_steps: None,
        keep_last: 1,
        best: None,
    };
    (dev.policy, dev.restore_best) = (never, false);
    (dev.step_log, dev.weight_trail, dev.early_stopping) = (false, None, None);
    Ok((dev, dir))
}
