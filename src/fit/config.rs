//! What a training run does besides training: the settings [`FitConfig`] (settings only; the
//! run's outcome is [`FitReport`](crate::fit::FitReport), in outcome.rs).
use std::path::PathBuf;

use crate::checkpoint::Policy;
use crate::fit::callbacks::Callbacks;
use crate::fit::parts::early_stopping::EarlyStopping;
use crate::train::{
    check_names, CrossEntropyLoss, EpochOptions, Float32MatmulPrecision, GradClip, LrSchedule,
    Monitor, Precision, SharedLoss, SharedMetric, Strategy,
};
use crate::train::{DdpOptions, ProfileSchedule};

/// Every setting of a [`Trainer`](crate::fit::Trainer) run; the builder's methods set these fields
/// one by one, and [`Trainer::with_config`](crate::fit::Trainer::with_config) takes them at once.
#[derive(Clone, Debug)]
pub struct FitConfig {
    /// Epochs to train in all (a resumed run trains only the ones still missing).
    pub epochs: u64,
    /// Rank 0 writes metrics.jsonl, curves.png, confusion.png, model.safetensors here, and
    /// checkpoints under `out/checkpoints`.
    pub out: PathBuf,
    /// When checkpoints are written and how many are kept.
    pub policy: Policy,
    /// Continue from the newest intact checkpoint in `out/checkpoints`, if any.
    pub resume: bool,
    /// After a stop by SIGUSR1 (Slurm's `--signal=USR1@N`) under Slurm (`SLURM_JOB_ID` set),
    /// rank 0 runs `scontrol requeue $SLURM_JOB_ID` once the checkpoint is written, as
    /// Lightning's SLURM environment does (see [`slurm_job_id`](crate::fit::slurm_job_id)). Default `false`.
    pub requeue: bool,
    /// The learning-rate schedule, stepped per epoch after validation or after every optimizer
    /// step (per its [`cadence`](LrSchedule::cadence)); its state goes into the checkpoints.
    pub schedule: Option<Box<dyn LrSchedule>>,
    /// Recorded in every checkpoint (the run's seed; seeding itself is up to the caller).
    pub seed: u64,
    /// Recorded in every checkpoint manifest (the run's hyper-parameters, for example).
    pub config: serde_json::Value,
    /// Progress bars/lines (rank 0 only).
    pub progress: bool,
    /// Gradient accumulation: micro-batches per optimizer step (1: none). Checkpoints are
    /// written only at the end of a window, so a resumed run never holds half a window.
    pub accumulate: usize,
    /// How the model is wrapped for data-parallel training.
    pub ddp: DdpOptions,
    /// Autocast for the forward pass (`Precision::F32`: none). `F16` trains with a
    /// `GradScaler` (torch's defaults) whose state goes into the checkpoints.
    pub precision: Precision,
    /// Train in the channels_last memory format: the model's 4-D parameters are converted
    /// before the data-parallel wrap and every batch is handed over in that layout.
    pub channels_last: bool,
    /// The training and validation loss (`CrossEntropyLoss::new()`: torch's defaults), any
    /// [`Loss`](crate::train::Loss); with the data's targets it decides the metrics
    /// ([`Task`](crate::train::Task)).
    pub loss: SharedLoss,
    /// Classification: also report the top-k accuracy with this `k` (`train_top_k`,
    /// `val_top_k` in metrics.jsonl). Default `None`.
    pub top_k: Option<usize>,
    /// On a CUDA device, loaders that deliver to the CPU deliver to the run's GPU during the
    /// run: batches staged in pinned memory and copied without blocking, so copies overlap the
    /// computation (torch's `DataLoader(pin_memory=True)` with `.to(device, non_blocking=True)`).
    /// `false` keeps the loaders as they are (a CPU batch is then copied to the GPU at each
    /// step, synchronously). No effect on the CPU. Default `true`.
    pub pin_memory: bool,
    /// Under several ranks, a loader in its own order (neither
    /// [`distributed`](crate::data::DataLoader::distributed) nor given a sampler) is sharded for
    /// the run as `distributed` would shard it, its shuffle and seed kept, and rank 0 says so:
    /// without it every rank would train on the whole data set (Lightning's
    /// `use_distributed_sampler`). `false` keeps such loaders as they are (each rank's data set
    /// is already its own share). Default `true`.
    pub use_distributed_sampler: bool,
    /// Gradient clipping before every optimizer step (`clip_grad_norm_` / `clip_grad_value_`,
    /// after the float16 `GradScaler`'s unscale). Default `None`.
    pub clip_grad: Option<GradClip>,
    /// Stop when the monitored validation metric stops improving. Default `None`.
    pub early_stopping: Option<EarlyStopping>,
    /// The validation metric `best/` and early stopping judge epochs by (Lightning's
    /// `monitor`). `None` (the default): `best/` by the metric of `policy.best`'s mode
    /// (`Max`: accuracy, `Min`: loss), early stopping by its own monitor.
    pub monitor: Option<Monitor>,
    /// At the end of the run, load `best/`'s weights into the model (Keras'
    /// `restore_best_weights`), so the returned model and `model.safetensors` are the best
    /// epoch's. Default `false`: the last epoch's.
    pub restore_best: bool,
    /// Keep an exponential moving average of the weights with this decay (timm's
    /// `ModelEmaV2`): updated after every optimizer step, validated after every epoch beside the
    /// model (`EpochRecord::ema_val_loss`, `ema_val_acc`), saved in every checkpoint and, at the
    /// end, as `out/model_ema.safetensors`. Default `None`.
    pub ema: Option<f64>,
    /// With [`ema`](Self::ema): torchvision's classification reference's cadence instead of
    /// timm's (an update every `every_steps` batches, copies during the warmup epochs; see
    /// [`EmaCadence`](crate::train::EmaCadence)). Default `None`: every optimizer step.
    pub ema_cadence: Option<crate::train::EmaCadence>,
    /// Train only the head (`fc.*`) for this many epochs, then the whole network (fastai's
    /// `fine_tune(freeze_epochs=N)`): at the first epoch and when the backbone is unfrozen, the
    /// parameters' `requires_grad` change ([`freeze_backbone`](crate::models::freeze_backbone))
    /// and the model is wrapped for data parallelism again, so that the gradients of the
    /// parameters that now train are averaged too (torch's DDP must be re-created when the set
    /// of parameters that require a gradient changes). A resumed run freezes or not by its
    /// epoch. After the run the backbone stays as the last epoch had it. Default 0: as given.
    pub freeze_backbone_epochs: u64,
    /// Rank 0 logs every optimizer step to `out/steps.csv` and TensorBoard event files under
    /// `out/tb/` (the examples' `--no-step-log` turns it off). The step values are read from the
    /// device with the running metrics, never on their own. Default `true`.
    pub step_log: bool,
    /// Rank 0 writes the weight trail, `out/weight_trail.jsonl`: checksums of every tensor of
    /// the model and of the optimizer's state every this many optimizer steps, to compare runs
    /// step by step (`trainbook-diff`, [`crate::trail`]). Default `None`.
    pub weight_trail: Option<u64>,
    /// Train on at most this many batches per epoch, the first of each epoch's order
    /// (Lightning's `limit_train_batches` as a count; every rank takes as many of its own
    /// shard): a quick look or a debug run. Default `None`: all.
    pub limit_train_batches: Option<usize>,
    /// Validate on at most this many batches per epoch (Lightning's `limit_val_batches`).
    /// Default `None`: all.
    pub limit_val_batches: Option<usize>,
    /// End the run after this many optimizer steps in all, even mid-epoch (Lightning's
    /// `max_steps`); that epoch is validated and checkpointed. Default `None`: `epochs` decide.
    pub max_steps: Option<u64>,
    /// Stop after the optimizer step at which this much time has passed since training started
    /// (Lightning's `max_time`), with a checkpoint, as SIGTERM stops a run: `fit` returns with
    /// [`FitReport::interrupted`](crate::fit::FitReport::interrupted) giving the reason
    /// `"max_time"` (counted as pre-emption: the examples exit with status 99), and running
    /// again with resume on continues the run. Unlike Lightning's `Timer`, the time does not
    /// add up over resumes: each `fit` call has its own (a job's share of a scheduler's time
    /// limit). Default `None`.
    pub max_time: Option<std::time::Duration>,
    /// A debug run of this many batches ([`Trainer::fast_dev_run`](crate::fit::Trainer::fast_dev_run)).
    /// Default `None`.
    pub fast_dev_run: Option<usize>,
    /// Called at the moments of the run, in order, after the built-in step logs.
    pub callbacks: Callbacks,
    /// Also validate after every this many optimizer steps, mid-epoch (Lightning's
    /// `val_check_interval` as a count; [`Trainer::val_every_steps`](crate::fit::Trainer::val_every_steps)).
    /// Default `None`: once per epoch.
    pub val_every_steps: Option<u64>,
    /// Train and validate on the first this many batches, in order, every epoch
    /// ([`Trainer::overfit_batches`](crate::fit::Trainer::overfit_batches)). Default `None`.
    pub overfit_batches: Option<usize>,
    /// Run with autograd's anomaly detection on
    /// ([`Trainer::detect_anomaly`](crate::fit::Trainer::detect_anomaly)). Default `false`.
    pub detect_anomaly: bool,
    /// Metrics of one's own, measured at every validation (and test) over all ranks
    /// ([`Trainer::metric`](crate::fit::Trainer::metric)). Default: none.
    pub metrics: Vec<SharedMetric>,
    /// Metrics of one's own, measured on the training batches of every epoch over all ranks
    /// and on each step ([`Trainer::train_metric`](crate::fit::Trainer::train_metric)).
    /// Default: none.
    pub train_metrics: Vec<SharedMetric>,
    /// Run the training step as a CUDA graph
    /// ([`Trainer::cuda_graphs`](crate::fit::Trainer::cuda_graphs)). Default `false`.
    pub cuda_graphs: bool,
    /// `torch.backends.cudnn.benchmark` for the run. Default `false`.
    pub cudnn_benchmark: bool,
    /// `torch.set_float32_matmul_precision` for the run. Default `None`: as the process has it.
    pub float32_matmul_precision: Option<Float32MatmulPrecision>,
    /// Record the steps this schedule selects with libtorch's profiler, traces in
    /// `OUT/profile/` ([`Trainer::profile`](crate::fit::Trainer::profile)). Default `None`.
    pub profile: Option<ProfileSchedule>,
    /// Emit NVTX ranges for Nsight Systems for the whole run
    /// ([`Trainer::emit_nvtx`](crate::fit::Trainer::emit_nvtx)). Default `false`.
    pub emit_nvtx: bool,
    /// Mix each training batch by MixUp or CutMix with these alphas `(mixup_alpha,
    /// cutmix_alpha)` ([`Trainer::mixup_cutmix`](crate::fit::Trainer::mixup_cutmix)). Default
    /// `None`.
    pub mixup_cutmix: Option<(f64, f64)>,
}

impl FitConfig {
    /// The counts that cannot be 0 (`limit_train_batches`, `weight_trail`, `max_steps`,
    /// `val_every_steps`, `overfit_batches`):
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming the first that is.
    pub fn check_counts(&self) -> crate::Result<()> {
        let zero = |what: &str| Err(crate::Error::InvalidArgument(what.into()));
        if self.limit_train_batches == Some(0) {
            return zero("limit_train_batches: 0 batches to train on");
        }
        if self.weight_trail == Some(0) {
            return zero("weight_trail: a checksum every 0 steps");
        }
        if self.max_steps == Some(0) {
            return zero("max_steps: 0 optimizer steps to train");
        }
        if self.overfit_batches == Some(0) {
            return zero("overfit_batches: 0 batches to train on");
        }
        if self.val_every_steps == Some(0) {
            return zero("val_every_steps: a validation every 0 steps");
        }
        if let Some(p) = self.profile {
            p.validated()?;
            if self.emit_nvtx {
                return zero(
                    "profile and emit_nvtx: both use the thread's profiler; ask for one of them",
                );
            }
        }
        Ok(())
    }

    /// The options of this run's epochs on `device` under `strategy`: progress, top-k, the own
    /// metrics, accumulation, precision, channels_last and clipping as configured.
    pub(crate) fn epoch_options<'a>(
        &'a self,
        device: tch::Device,
        strategy: &'a dyn Strategy,
    ) -> EpochOptions<'a> {
        let opts = EpochOptions::on(device)
            .strategy(strategy)
            .progress(self.progress)
            .top_k_opt(self.top_k)
            .metrics(&self.metrics)
            .train_metrics(&self.train_metrics)
            .accumulate(self.accumulate)
            .precision(self.precision)
            .channels_last(self.channels_last);
        match self.clip_grad {
            Some(c) => opts.clip_grad(c),
            None => opts,
        }
    }

    /// The run's own metrics have usable names, none twice, and a monitor of one
    /// ([`Monitor::Metric`]) names one of them: else
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) saying which.
    pub fn check_metrics(&self) -> crate::Result<()> {
        check_names(&self.metrics)?;
        check_names(&self.train_metrics)?;
        let early = self.early_stopping.as_ref().map(|e| e.monitor);
        for monitor in [self.monitor, early].into_iter().flatten() {
            let Monitor::Metric(n) = monitor else { continue };
            if !self.metrics.iter().any(|m| m.name() == n.name) {
                let names: Vec<&str> = self.metrics.iter().map(|m| m.name()).collect();
                return Err(crate::Error::InvalidArgument(format!(
                    "monitor {monitor}: no metric {:?} is registered with Trainer::metric (registered: {})",
                    n.name,
                    if names.is_empty() { "none".to_string() } else { names.join(", ") }
                )));
            }
        }
        Ok(())
    }
}

impl Default for FitConfig {
    /// One epoch into `runs/fit`, resuming if a checkpoint is there, checkpoints per
    /// [`Policy::default`], no schedule, progress shown, float32, no accumulation, default
    /// DDP options, plain cross-entropy, no Slurm requeue, pinned batches on CUDA, no clipping,
    /// no early stopping, no EMA, the step logs on, no weight trail, every batch, no step limit, no callbacks, no metrics of one's own, validation once per epoch.
    fn default() -> Self {
        FitConfig {
            epochs: 1,
            out: PathBuf::from("runs/fit"),
            policy: Policy::default(),
            resume: true,
            requeue: false,
            schedule: None,
            seed: 0,
            config: serde_json::Value::Null,
            progress: true,
            accumulate: 1,
            ddp: DdpOptions::default(),
            precision: Precision::F32,
            channels_last: false,
            loss: SharedLoss::new(CrossEntropyLoss::new()),
            top_k: None,
            pin_memory: true,
            use_distributed_sampler: true,
            clip_grad: None,
            early_stopping: None,
            monitor: None,
            restore_best: false,
            ema: None,
            ema_cadence: None,
            freeze_backbone_epochs: 0,
            step_log: true,
            weight_trail: None,
            limit_train_batches: None,
            limit_val_batches: None,
            max_steps: None,
            max_time: None,
            fast_dev_run: None,
            callbacks: Callbacks::default(),
            metrics: Vec::new(),
            train_metrics: Vec::new(),
            val_every_steps: None,
            detect_anomaly: false,
            overfit_batches: None,
            cuda_graphs: false,
            cudnn_benchmark: false,
            float32_matmul_precision: None,
            profile: None,
            emit_nvtx: false,
            mixup_cutmix: None,
        }
    }
}
