//! [`Trainer`]: the builder for a whole training run, with defaults for everything but the
//! model, the optimizer and the data (in the spirit of Lightning's `Trainer` and burn's
//! `Learner`).

use tch::Device;

use crate::dist::Dist;
use crate::fit::callbacks::{IntoSharedCallback, SharedCallback};
use crate::fit::config::FitConfig;
use crate::fit::parts::early_stopping::EarlyStopping;
use crate::train::DdpOptions;
use crate::train::{GradClip, LrSchedule, Monitor, Precision, ReduceLROnPlateau};

/// A training run on one rank of `dist` (a world of one without a launcher): resume from the
/// newest intact checkpoint, epochs of training and validation, checkpoints, the metrics log,
/// the curves, the confusion matrix and the final weights (rank 0 writes the files).
///
/// Defaults ([`FitConfig::default`]): 1 epoch into `runs/fit`, resume on, a checkpoint every
/// epoch (the last 2 kept, plus `best/` by validation accuracy), progress shown, float32,
/// plain cross-entropy, torch's DDP defaults.
///
/// # Example
/// ```no_run
/// use trainbook::prelude::*;
///
/// # fn main() -> trainbook::Result<()> {
/// let dist = Dist::init()?;
/// let root = std::path::Path::new("data/mnist");
/// ensure_mnist(root)?;
/// let tf = compose![ToTensor, Normalize::new(&[0.1307], &[0.3081])];
/// let train = Mnist::new(root, true)?.with_transform(tf.clone());
/// let test = Mnist::new(root, false)?.with_transform(tf);
/// let mut train = DataLoader::new(train, 64).shuffle(true).distributed(&dist);
/// let mut test = DataLoader::new(test, 1000).distributed(&dist);
///
/// let mut vs = VarStore::new(dist.device());
/// let net = MnistNet::new(&vs.root());
/// let mut opt = Optimizer::adam(&vs, 1e-3);
/// let report = Trainer::new(&dist)
///     .epochs(3)
///     .out("runs/mnist")
///     .checkpoint_every_steps(100)
///     .fit(&mut vs, &net, &mut opt, &mut train, &mut test)?;
/// println!("best accuracy {:?}", report.best_val_acc);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Trainer<'d> {
    dist: &'d Dist,
    cfg: FitConfig,
}

impl std::fmt::Debug for Trainer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trainer")
            .field("rank", &self.dist.rank())
            .field("world_size", &self.dist.world_size())
            .field("config", &self.cfg)
            .finish()
    }
}

/// Building a trainer and reading its settings.
impl<'d> Trainer<'d> {
    /// A run with the defaults of [`FitConfig::default`].
    pub fn new(dist: &'d Dist) -> Self {
        Self::with_config(dist, FitConfig::default())
    }

    /// A run with every setting given at once.
    pub fn with_config(dist: &'d Dist, cfg: FitConfig) -> Self {
        Trainer { dist, cfg }
    }

    /// The settings so far.
    pub fn config(&self) -> &FitConfig {
        &self.cfg
    }
}

/// The learning rate's schedule, the seed, the recorded settings and the progress display.
impl Trainer<'_> {
    /// The learning-rate schedule (default none): [`ReduceLROnPlateau`],
    /// [`StepLR`](crate::train::StepLR), [`CosineAnnealingLR`](crate::train::CosineAnnealingLR),
    /// [`LinearLR`](crate::train::LinearLR), [`OneCycleLR`](crate::train::OneCycleLR) or any
    /// [`LrSchedule`]. A fresh run [`start`](LrSchedule::start)s it on the optimizer's rate;
    /// it is then stepped after each epoch's validation or after every optimizer step, per its
    /// [`cadence`](LrSchedule::cadence). Its state goes into every checkpoint and comes back
    /// on resume, so a resumed run follows the same rates. Bad hyper-parameters make `fit`
    /// fail with [`Error::InvalidArgument`](crate::Error::InvalidArgument) before training.
    ///
    /// ```no_run
    /// # use trainbook::prelude::*;
    /// # use trainbook::train::OneCycleLR;
    /// # fn main() -> trainbook::Result<()> {
    /// # let dist = Dist::single(Device::Cpu);
    /// // 10 epochs of 469 optimizer steps: one cycle over the whole run.
    /// let trainer = Trainer::new(&dist).epochs(10).schedule(OneCycleLR::new(0.01, 10 * 469));
    /// # Ok(()) }
    /// ```
    pub fn schedule(mut self, schedule: impl LrSchedule + 'static) -> Self {
        self.cfg.schedule = Some(Box::new(schedule));
        self
    }

    /// [`schedule`](Self::schedule) with a [`ReduceLROnPlateau`]: after each epoch it looks at
    /// the validation loss ([`Mode::Min`](crate::train::Mode::Min)) or the validation accuracy ([`Mode::Max`](crate::train::Mode::Max)).
    pub fn plateau(self, scheduler: ReduceLROnPlateau) -> Self {
        self.schedule(scheduler)
    }

    /// The seed recorded in checkpoints (seeding itself is up to the caller). Default 0.
    pub fn seed(mut self, seed: u64) -> Self {
        self.cfg.seed = seed;
        self
    }

    /// The run's settings as JSON, recorded in every checkpoint manifest.
    pub fn record_config(mut self, config: serde_json::Value) -> Self {
        self.cfg.config = config;
        self
    }

    /// Progress bars or lines on rank 0 (default `true`).
    pub fn progress(mut self, show: bool) -> Self {
        self.cfg.progress = show;
        self
    }
}

/// The step: gradient accumulation, DDP's options, precision, memory format, clipping.
impl Trainer<'_> {
    /// Gradient accumulation: micro-batches per optimizer step (default 1: none).
    pub fn accumulate(mut self, micro_batches: usize) -> Self {
        self.cfg.accumulate = micro_batches;
        self
    }

    /// How the model is wrapped for data-parallel training (torch's DDP options).
    pub fn ddp(mut self, options: DdpOptions) -> Self {
        self.cfg.ddp = options;
        self
    }

    /// Autocast precision of the forward pass (default float32; `F16` adds a GradScaler).
    pub fn precision(mut self, precision: Precision) -> Self {
        self.cfg.precision = precision;
        self
    }

    /// Train in the channels_last memory format (model and batches). Default `false`.
    pub fn channels_last(mut self, on: bool) -> Self {
        self.cfg.channels_last = on;
        self
    }

    /// Clips the gradients' total 2-norm to `max_norm` before every optimizer step
    /// (`torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)` between `backward` and
    /// `step`; under float16 after `scaler.unscale_`). Each epoch's line and `metrics.jsonl`
    /// record then carry the mean norm before clipping (`grad_norm`). Default: no clipping.
    pub fn clip_grad_norm(mut self, max_norm: f64) -> Self {
        self.cfg.clip_grad = Some(GradClip::norm(max_norm));
        self
    }

    /// Clamps every gradient element to `[-value, value]` before every optimizer step
    /// (`torch.nn.utils.clip_grad_value_`). Default: no clipping.
    pub fn clip_grad_value(mut self, value: f64) -> Self {
        self.cfg.clip_grad = Some(GradClip::Value(value));
        self
    }
}

/// Judging the epochs: early stopping, the monitored metric, the best weights.
impl Trainer<'_> {
    /// Stops the run when the monitored metric has not improved for `early.patience` epochs
    /// (Lightning's `EarlyStopping`); its state goes into checkpoints. Default: none.
    ///
    /// ```no_run
    /// # use trainbook::prelude::*;
    /// # use trainbook::train::Monitor;
    /// # fn f(dist: &Dist) {
    /// use trainbook::fit::EarlyStopping;
    /// let trainer = Trainer::new(dist)
    ///     .epochs(100)
    ///     .monitor(Monitor::ValLoss) // best/ and early stopping by the validation loss
    ///     .early_stopping(EarlyStopping::new(Monitor::ValLoss, 5).min_delta(1e-3));
    /// # }
    /// ```
    pub fn early_stopping(mut self, early: EarlyStopping) -> Self {
        self.cfg.early_stopping = Some(early);
        self
    }

    /// The validation metric `best/` and early stopping judge epochs by (Lightning's
    /// `monitor`; its mode follows: lower loss, higher accuracy is better). Default: `best/` by
    /// accuracy, early stopping by its own monitor.
    pub fn monitor(mut self, monitor: Monitor) -> Self {
        self.cfg.monitor = Some(monitor);
        self
    }

    /// At the end of the run, load the best epoch's weights (`best/`, judged by the monitored
    /// metric) into the model, so the model after `fit` and `model.safetensors` are the best
    /// epoch's rather than the last's (Keras' `restore_best_weights`). Default `false`.
    pub fn restore_best(mut self, on: bool) -> Self {
        self.cfg.restore_best = on;
        self
    }
}

/// The loss and the counts beside it.
impl Trainer<'_> {
    /// The loss (default `CrossEntropyLoss::new()`): any [`Loss`](crate::train::Loss), such as
    /// `MSELoss` for a regression head on float targets or `BCEWithLogitsLoss` for multi-hot
    /// ones, or a closure giving per-sample losses. With the data's targets it decides what the
    /// run measures ([`Task`](crate::train::Task)): accuracy, errors or F1.
    ///
    /// ```no_run
    /// # use trainbook::prelude::*;
    /// # use trainbook::train::{MSELoss, Monitor};
    /// # fn f(dist: &Dist) {
    /// let trainer = Trainer::new(dist).loss(MSELoss).monitor(Monitor::ValMae);
    /// # }
    /// ```
    pub fn loss(mut self, loss: impl crate::train::Loss + 'static) -> Self {
        self.cfg.loss = crate::train::SharedLoss::new(loss);
        self
    }

    /// Classification: also report the top-`k` accuracy (e.g. 5 for ImageNet); see
    /// [`FitConfig::top_k`].
    pub fn top_k(mut self, k: usize) -> Self {
        self.cfg.top_k = Some(k);
        self
    }
}

/// Slurm's requeue, the loaders' pinned memory and their sharding over the ranks.
impl Trainer<'_> {
    /// Under Slurm, requeue the job after a stop by SIGUSR1 (`sbatch --signal=USR1@90
    /// --requeue`): rank 0 runs `scontrol requeue $SLURM_JOB_ID` once the checkpoint is
    /// written, and the requeued job resumes from it. Default `false`.
    pub fn requeue(mut self, on: bool) -> Self {
        self.cfg.requeue = on;
        self
    }

    /// On a CUDA device, deliver the batches of CPU loaders to the GPU pinned and without
    /// blocking (torch's `pin_memory=True`); default `true`. See [`FitConfig::pin_memory`].
    pub fn pin_memory(mut self, on: bool) -> Self {
        self.cfg.pin_memory = on;
        self
    }

    /// Under several ranks, shard a loader in its own order for the run (Lightning's
    /// `use_distributed_sampler`); default `true`. See [`FitConfig::use_distributed_sampler`].
    pub fn use_distributed_sampler(mut self, on: bool) -> Self {
        self.cfg.use_distributed_sampler = on;
        self
    }
}

/// An average of the weights, and training the head alone first.
impl Trainer<'_> {
    /// Keeps an exponential moving average of the weights with `decay` (timm's `ModelEmaV2`,
    /// e.g. 0.999); see [`FitConfig::ema`].
    pub fn ema(mut self, decay: f64) -> Self {
        self.cfg.ema = Some(decay);
        self
    }

    /// torchvision's classification reference's `--model-ema`: an average with `decay` (its
    /// adjusted decay, [`torchvision_ema_decay`](crate::train::torchvision_ema_decay)) updated
    /// after every `cadence.every_steps`-th batch of an epoch, a copy of the model at its first
    /// update and at every update of the first `cadence.copy_epochs` epochs; validated, saved
    /// and checkpointed as [`ema`](Self::ema)'s ([`FitConfig::ema_cadence`]).
    pub fn model_ema_torchvision(mut self, decay: f64, cadence: crate::train::EmaCadence) -> Self {
        self.cfg.ema = Some(decay);
        self.cfg.ema_cadence = Some(cadence);
        self
    }

    /// Trains only the head (`fc.*`) for the first `epochs` epochs, then the whole network,
    /// rewrapping the model for data parallelism when that changes; see
    /// [`FitConfig::freeze_backbone_epochs`].
    pub fn freeze_backbone_epochs(mut self, epochs: u64) -> Self {
        self.cfg.freeze_backbone_epochs = epochs;
        self
    }
}

/// Callbacks.
impl Trainer<'_> {
    /// Adds a [`Callback`](crate::fit::Callback) (after those added before): one moved in, or one you share
    /// (`Arc::new(Mutex::new(c))`, a clone kept) to read what it gathered after the run.
    ///
    /// ```no_run
    /// # use std::sync::{Arc, Mutex};
    /// # use trainbook::prelude::*;
    /// # use trainbook::fit::{Callback, GradientNoise};
    /// #[derive(Default)]
    /// struct Losses(Vec<f64>);
    /// impl Callback for Losses {
    ///     fn on_train_steps(&mut self, steps: &[trainbook::train::StepRecord]) -> trainbook::Result<()> {
    ///         self.0.extend(steps.iter().map(|s| s.loss));
    ///         Ok(())
    ///     }
    /// }
    /// # fn main() -> trainbook::Result<()> {
    /// let dist = Dist::single(Device::Cpu);
    /// let losses = Arc::new(Mutex::new(Losses::default()));
    /// let trainer = Trainer::new(&dist)
    ///     .callback(GradientNoise::new(0.01, 0.55, 0)?) // moved in
    ///     .callback(losses.clone()); // shared
    /// // ... trainer.fit(...) ...; then losses.lock().unwrap().0 holds every step's loss
    /// # Ok(()) }
    /// ```
    pub fn callback(mut self, callback: impl IntoSharedCallback) -> Self {
        self.cfg.callbacks.push(callback.into_shared_callback());
        self
    }

    /// The same as [`callback`](Self::callback), which now also takes a shared callback;
    /// `callback_shared` stays for one release.
    #[deprecated(note = "use Trainer::callback, which takes a shared callback too")]
    pub fn callback_shared(self, callback: SharedCallback) -> Self {
        self.callback(callback)
    }
}

/// Where a loader that delivers to `loader` delivers during a run on `run`: a CPU loader
/// delivers to the run's GPU when `pin_memory` is on (pinned, without blocking); any other
/// combination leaves it as it is.
fn batch_device(run: Device, pin_memory: bool, loader: Device) -> Device {
    if pin_memory && run.is_cuda() && loader == Device::Cpu {
        run
    } else {
        loader
    }
}

mod batch_mix;
mod batch_size_find;
mod checkpoints;
mod deprecated;
mod gpu_speed;
mod lr_find;
pub use predict_stage::TtaView;
mod own_metrics;
mod predict_stage;
mod run_control;
mod run_verb;
mod test_stage;
#[cfg(test)]
mod tests;
