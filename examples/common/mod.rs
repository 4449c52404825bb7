//! The command-line flags and the set-up that the examples share (each example includes this
//! file with `mod common;`; Cargo builds no example of its own from a folder without main.rs).
//!
//! - [`RunArgs`], in every example: `--device`, `--seed`, `--workers`, `--no-resume`,
//!   `--precision`, `--channels-last`, `--clip-grad-norm`, `--monitor-metric`, `--metric`,
//!   `--train-metric`, `--early-stop`, `--requeue`, `--no-step-log`, `--ema`, `--freeze-epochs`, `--sync-bn`, `--weight-trail`,
//!   `--limit-train-batches`, `--limit-val-batches`, `--max-steps`, `--val-every-steps`,
//!   `--detect-anomaly`, `--overfit-batches`, `--fast-dev-run`,
//!   `--test-only` (with `--resume PATH`), `--lr-find`, `--find-batch-size`, with
//!   [`RunArgs::dist`] (join the launcher's process group), [`RunArgs::trainer`] (a [`Trainer`]
//!   with those settings), [`RunArgs::metrics`] (`--metric`, `--train-metric`, with the model's class count), [`RunArgs::sync_batchnorm`] (the ResNet examples' `--sync-bn`) and
//!   [`RunArgs::instead_of_training`] (`--test-only`, `--lr-find`, `--find-batch-size`).
//! - [`exit_status`]: one line on stderr after an error (the rank, what happened; a broken
//!   connection to another rank said as such, with what the launcher does next), exit status 1.
//! - [`exit_if_preempted`]: every example's exit status after a run stopped by SIGTERM or
//!   SIGUSR1 is 99 ([`PREEMPTED_EXIT_CODE`]: checkpoint written, run the same command again
//!   to continue; with `--requeue` under Slurm the job is requeued first); 0 after a finished
//!   run or a stop by Ctrl-C or `OUT/STOP`; 1 after an error.
//! - [`FitArgs`], in mnist, mnist_regression and designsafe: `--save-every`, `--save-every-steps`, `--keep-last`,
//!   `--accumulate`, `--find-unused-parameters`, put on a [`Trainer`] by [`FitArgs::apply`].
//!
//! An example flattens them into its own `#[derive(Parser)]` struct with `#[command(flatten)]`
//! and keeps there what is its own: the data, the model's settings, and the flags whose
//! defaults differ between examples (`--epochs`, `--batch-size`, `--lr`, `--out`). Where one
//! example wants another default or help text for a shared flag, it says so on its struct with
//! `#[command(mut_arg(..))]`: tiny_imagenet's --workers defaults to 4, dogs' --seed help names
//! the split it also draws.
// Every example uses RunArgs, not every example FitArgs.
#![allow(dead_code)]

use std::process::ExitCode;

mod stages;

// classify calls it; the other examples reach it through `RunArgs::test_only`.
#[allow(unused_imports)]
pub use stages::checkpoint_to_test;

use clap::Args;
use trainbook::dist::DistOptions;
use trainbook::dist::{failure_line, LaunchEnv};
use trainbook::fit::{EarlyStopping, PREEMPTED_EXIT_CODE};
use trainbook::models::ResNet;
use trainbook::prelude::*;
use trainbook::train::{DdpOptions, Float32MatmulPrecision, Monitor, Precision};

/// The flags every example has.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// auto (CUDA device LOCAL_RANK when available), cpu or cuda.
    #[arg(long, default_value = "auto")]
    pub device: String,
    /// Seed of the shuffling and the initial weights.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Loader threads per rank.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Start fresh even if OUT/checkpoints holds a checkpoint.
    #[arg(long)]
    pub no_resume: bool,
    /// Arithmetic of the forward pass: f32, bf16 (autocast) or f16 (autocast + GradScaler).
    #[arg(long, default_value = "f32")]
    pub precision: Precision,
    /// Train in the channels_last memory format (model and batches).
    #[arg(long)]
    pub channels_last: bool,
    /// Clip the gradients' total 2-norm to X before every optimizer step (torch's
    /// clip_grad_norm_); epoch lines then show the mean norm before clipping.
    #[arg(long, value_name = "X")]
    pub clip_grad_norm: Option<f64>,
    /// The validation metric that best/ (the kept best model), early stopping and the plateau
    /// schedule judge epochs by: val_loss, val_acc (classification), val_mae, val_rmse
    /// (regression) or val_f1 (multi-label) (default: best/ by accuracy for classification,
    /// by the loss for regression; the schedule and early stopping by the loss). `--monitor`
    /// is the same flag for runs without torchrun, whose parser reads `--monitor` as an
    /// abbreviation of its own `--monitor-interval` and stops.
    /// A built-in metric's val_NAME (see --metric) is measured without listing it there.
    #[arg(long = "monitor-metric", alias = "monitor", value_name = "METRIC")]
    pub monitor: Option<Monitor>,
    /// Also measure these metrics at every validation, over all ranks (comma-separated or
    /// repeated): precision_, recall_ or f1_ followed by micro, macro or weighted
    /// (torchmetrics' Multiclass* with that average), or auroc (MulticlassAUROC over 100
    /// thresholds); shown as val_NAME in the epoch line, metrics.jsonl and TensorBoard.
    #[arg(long = "metric", value_name = "NAME", value_delimiter = ',')]
    pub metrics: Vec<String>,
    /// Measure these metrics (the names of --metric) on the training batches too: train_NAME
    /// per epoch over all ranks (epoch line, metrics.jsonl, TensorBoard) and a NAME column per
    /// step in steps.csv.
    #[arg(long = "train-metric", value_name = "NAME", value_delimiter = ',')]
    pub train_metrics: Vec<String>,
    /// Stop after PATIENCE epochs in which the monitored metric did not improve.
    #[arg(long, value_name = "PATIENCE")]
    pub early_stop: Option<u64>,
    /// Under Slurm, requeue the job (scontrol requeue) after a stop by SIGUSR1 (sbatch
    /// --signal=USR1@90 --requeue), once the checkpoint is written.
    #[arg(long)]
    pub requeue: bool,
    /// Do not write OUT/steps.csv and the TensorBoard event files under OUT/tb/ (every
    /// optimizer step's loss and learning rate; on by default).
    #[arg(long)]
    pub no_step_log: bool,
    /// Keep an exponential moving average of the weights with this decay (timm's ModelEmaV2,
    /// e.g. 0.999): validated every epoch beside the model, saved in the checkpoints and as
    /// OUT/model_ema.safetensors.
    #[arg(long, value_name = "DECAY")]
    pub ema: Option<f64>,
    /// Train only the head (fc.*) for the first N epochs, then the whole network (the ResNet
    /// examples; under DDP the model is wrapped again when the backbone is unfrozen).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub freeze_epochs: u64,
    /// Normalise with the BatchNorm statistics of all ranks' batches (torch's
    /// SyncBatchNorm.convert_sync_batchnorm; the ResNet examples; nothing changes on one rank).
    #[arg(long)]
    pub sync_bn: bool,
    /// Write OUT/weight_trail.jsonl: checksums of the weights and of the optimizer's state every
    /// N optimizer steps, which `trainbook-diff RUN_A RUN_B` compares to name the first step
    /// and tensor at which two runs differ.
    #[arg(long, value_name = "N")]
    pub weight_trail: Option<u64>,
    /// Train on at most N batches per epoch (per rank), the first of each epoch's order, for a
    /// quick look or a debug run (Lightning's limit_train_batches).
    #[arg(long, value_name = "N")]
    pub limit_train_batches: Option<usize>,
    /// Validate on at most N batches per epoch (per rank; Lightning's limit_val_batches).
    #[arg(long, value_name = "N")]
    pub limit_val_batches: Option<usize>,
    /// End the run after N optimizer steps in all, even mid-epoch (Lightning's max_steps).
    #[arg(long, value_name = "N")]
    pub max_steps: Option<u64>,
    /// Also validate after every N optimizer steps in the middle of epochs (Lightning's
    /// val_check_interval=N): a line per validation and OUT/val_steps.jsonl.
    #[arg(long, value_name = "N")]
    pub val_every_steps: Option<u64>,
    /// Train and validate on the first N batches, in order, every epoch (Lightning's
    /// overfit_batches=N): a model that cannot overfit them has a bug.
    #[arg(long, value_name = "N")]
    pub overfit_batches: Option<usize>,
    /// Run with autograd's anomaly detection (torch.autograd.detect_anomaly): the first backward
    /// function that returns a NaN stops the run, named (slower).
    #[arg(long)]
    pub detect_anomaly: bool,
    /// Capture the training step (forward, loss, backward) as a CUDA graph after 3 eager steps
    /// and replay it for every full batch: fewer kernel launches at small batches. On the CPU,
    /// with more than one process, with --accumulate or float16, the step runs eagerly and the
    /// run says why.
    #[arg(long)]
    pub cuda_graphs: bool,
    /// cuDNN times its convolution algorithms for each new shape and keeps the fastest
    /// (torch.backends.cudnn.benchmark = True).
    #[arg(long)]
    pub cudnn_benchmark: bool,
    /// float32 matrix products on TF32 tensor cores (torch.set_float32_matmul_precision("high");
    /// cuDNN's float32 convolutions may use TF32 already: torch.backends.cudnn.allow_tf32
    /// defaults to True).
    #[arg(long)]
    pub tf32: bool,
    /// Record N optimizer steps (after 1 idle and 1 warm-up step) with libtorch's profiler
    /// (torch.profiler.schedule(wait=1, warmup=1, active=N)): each rank's Chrome trace in
    /// OUT/profile/, with the loop's phases as ranges and, on a GPU, the kernels.
    #[arg(long, value_name = "N")]
    pub profile: Option<usize>,
    /// NVTX ranges for Nsight Systems for the whole run (torch.autograd.profiler.emit_nvtx):
    /// run under `nsys profile`. Needs a CUDA build; not with --profile.
    #[arg(long)]
    pub nvtx: bool,
    /// MixUp's alpha (torchvision's --mixup-alpha; 0: off): each training batch may be mixed
    /// with weights from Beta(alpha, alpha), the labels mixed alike.
    #[arg(long, default_value_t = 0.0)]
    pub mixup_alpha: f64,
    /// CutMix's alpha (torchvision's --cutmix-alpha; 0: off); with --mixup-alpha too, each
    /// batch gets one of the two, chosen with equal chance.
    #[arg(long, default_value_t = 0.0)]
    pub cutmix_alpha: f64,
    /// A debug run (Lightning's fast_dev_run): one epoch of the first N training and validation
    /// batches in a scratch folder, nothing written to OUT, no checkpoints.
    #[arg(long, value_name = "N")]
    pub fast_dev_run: Option<usize>,
    /// Only evaluate on the validation/test set and exit (torchvision's --test-only): the
    /// weights of --weights when the example has it and it is given, else OUT's latest
    /// checkpoint.
    #[arg(long)]
    pub test_only: bool,
    /// Run the learning-rate range test instead of training (fastai's lr_find: the rate grows
    /// from 1e-7 to 10 over at most 100 steps on the training set, then the weights and the
    /// optimizer are put back): prints the suggested rate and writes OUT/lr_find.png.
    #[arg(long)]
    pub lr_find: bool,
    /// Find the largest batch size that fits instead of training (Lightning's batch-size
    /// finder: 3 steps at batch 2, 4, 8, ... until one runs out of memory or above
    /// --max-memory-gib, then the weights and the optimizer are put back): prints each trial
    /// and the answer. On the CPU --max-memory-gib is required.
    #[arg(long)]
    pub find_batch_size: bool,
    /// --find-batch-size's limit: a batch does not fit when the process's peak resident memory
    /// (CPU) or the GPU's peak reserved memory is above this many GiB.
    #[arg(long, value_name = "GIB")]
    pub max_memory_gib: Option<f64>,
    /// With --test-only: evaluate this checkpoint instead of OUT's latest: a checkpoint folder
    /// (OUT/checkpoints/step-..., OUT/checkpoints/best) or another run's OUT (its latest). A
    /// training run always continues from its own OUT/checkpoints.
    #[arg(long, value_name = "PATH")]
    pub resume: Option<std::path::PathBuf>,
}

impl RunArgs {
    /// Joins the process group the launcher describes (torchrun's, or the Ray or Dask
    /// launcher's environment), on `--device`; a world of one without a launcher.
    pub fn dist(&self) -> trainbook::Result<Dist> {
        Dist::init_with(DistOptions::default().with_device_name(&self.device)?)
    }

    /// A [`Trainer`] on `dist` that resumes unless `--no-resume`, records `--seed` in its
    /// checkpoints and trains in `--precision`, channels_last with `--channels-last`,
    /// clipping gradients with `--clip-grad-norm`, judging epochs by `--monitor-metric`, stopping
    /// early with `--early-stop`, requeueing its Slurm job with `--requeue`, logging steps
    /// unless `--no-step-log`, averaging the weights with `--ema`, freezing the backbone for
    /// the first `--freeze-epochs`, keeping the weight trail with `--weight-trail`, on at most
    /// `--limit-train-batches` / `--limit-val-batches` batches per epoch.
    /// The example adds its epochs, output folder, schedule and recorded config.
    pub fn trainer<'d>(&self, dist: &'d Dist) -> Trainer<'d> {
        let trainer = Trainer::new(dist)
            .resume(!self.no_resume)
            .seed(self.seed)
            .precision(self.precision)
            .channels_last(self.channels_last)
            .requeue(self.requeue)
            .step_log(!self.no_step_log)
            .freeze_backbone_epochs(self.freeze_epochs);
        let trainer = trainer
            .limit_batches(self.limit_train_batches, self.limit_val_batches)
            .max_steps(self.max_steps)
            .val_every_steps(self.val_every_steps)
            .detect_anomaly(self.detect_anomaly)
            .overfit_batches(self.overfit_batches)
            .fast_dev_run(self.fast_dev_run)
            .cuda_graphs(self.cuda_graphs)
            .cudnn_benchmark(self.cudnn_benchmark)
            .emit_nvtx(self.nvtx);
        let trainer = if self.mixup_alpha != 0.0 || self.cutmix_alpha != 0.0 {
            trainer.mixup_cutmix(self.mixup_alpha, self.cutmix_alpha)
        } else {
            trainer
        };
        let trainer = match self.profile {
            Some(n) => trainer.profile(n),
            None => trainer,
        };
        let trainer = if self.tf32 {
            trainer.float32_matmul_precision(Float32MatmulPrecision::High)
        } else {
            trainer
        };
        let trainer = match self.weight_trail {
            Some(n) => trainer.weight_trail(n),
            None => trainer,
        };
        let trainer = match self.ema {
            Some(decay) => trainer.ema(decay),
            None => trainer,
        };
        let trainer = match self.clip_grad_norm {
            Some(x) => trainer.clip_grad_norm(x),
            None => trainer,
        };
        let trainer = match self.monitor {
            Some(m) => trainer.monitor(m),
            None => trainer,
        };
        match self.early_stop {
            Some(patience) => trainer.early_stopping(EarlyStopping::new(
                self.monitor.unwrap_or(Monitor::ValLoss),
                patience,
            )),
            None => trainer,
        }
    }

    /// With `--sync-bn`, turns the ResNet's BatchNorm layers into SyncBatchNorm over `dist`'s
    /// ranks (saying so on rank 0).
    pub fn sync_batchnorm(&self, net: &ResNet, dist: &Dist) -> trainbook::Result<()> {
        if self.sync_bn && net.convert_sync_batchnorm(dist)? {
            dist.println(format!("SyncBatchNorm over {} ranks", dist.world_size()));
        }
        Ok(())
    }

    /// The mode of the example's `ReduceLROnPlateau`: `--monitor-metric`'s, else the loss's (`Min`).
    pub fn plateau_mode(&self) -> Mode {
        self.monitor.map_or(Mode::Min, Monitor::mode)
    }
}

/// The exit status of an example whose run returned `result`: 0, or after an error one line on
/// stderr, `PROGRAM: rank R of W stopped: ...` (the rank as the launcher set it), and 1. When
/// another rank's connection broke (it died or was killed), the line says so and what the
/// launcher does next ([`failure_line`]); never a backtrace, even with `RUST_BACKTRACE=1`
/// (which evcxr sets for every program a notebook starts).
pub fn exit_status(program: &str, result: anyhow::Result<()>) -> ExitCode {
    let Err(error) = result else { return ExitCode::SUCCESS };
    let env = LaunchEnv::from_env().ok().flatten();
    let line = match error.downcast_ref::<trainbook::Error>() {
        Some(e) => failure_line(e, env.as_ref()),
        None => {
            let who = env.map_or("stopped".into(), |e| {
                format!("rank {} of {} stopped", e.rank, e.world_size)
            });
            format!("{who}: {error:#}").split_whitespace().collect::<Vec<_>>().join(" ")
        }
    };
    eprintln!("{program}: {line}");
    ExitCode::FAILURE
}

/// Ends the process with status [`PREEMPTED_EXIT_CODE`] (99) when `report` says the run was
/// stopped by SIGTERM or SIGUSR1; returns otherwise. Call after `dist.destroy()`.
pub fn exit_if_preempted(report: &FitReport) {
    if let Some(stop) = report.interrupted.as_ref().filter(|s| s.preempted()) {
        eprintln!(
            "stopped by {} with a checkpoint{}: exit status {PREEMPTED_EXIT_CODE}; run the same \
             command again to continue",
            stop.reason,
            if stop.requeued { ", Slurm job requeued" } else { "" }
        );
        std::process::exit(PREEMPTED_EXIT_CODE);
    }
}

/// Checkpoint cadence, gradient accumulation and DDP's unused-parameter search: flags of mnist,
/// mnist_regression and designsafe. tiny_imagenet and dogs keep the [`Trainer`]'s defaults,
/// which are these flags' defaults (tiny_imagenet has its own --save-every-steps).
#[derive(Args, Debug)]
pub struct FitArgs {
    /// Write a checkpoint every N epochs (0: never).
    #[arg(long, default_value_t = 1)]
    pub save_every: u64,
    /// Also write a checkpoint every N optimizer steps (mid-epoch).
    #[arg(long)]
    pub save_every_steps: Option<u64>,
    /// Checkpoints to keep in OUT/checkpoints.
    #[arg(long, default_value_t = 2)]
    pub keep_last: usize,
    /// Gradient accumulation: micro-batches per optimizer step (the effective batch is
    /// batch-size x accumulate x ranks).
    #[arg(long, default_value_t = 1)]
    pub accumulate: usize,
    /// Let DDP find parameters that get no gradient in a step (torch's find_unused_parameters).
    #[arg(long)]
    pub find_unused_parameters: bool,
}

impl FitArgs {
    /// `trainer` with these settings.
    pub fn apply<'d>(&self, trainer: Trainer<'d>) -> Trainer<'d> {
        trainer
            .checkpoint_every_epochs(self.save_every)
            .checkpoint_every_steps(self.save_every_steps.unwrap_or(0))
            .keep_last(self.keep_last)
            .accumulate(self.accumulate)
            .ddp(DdpOptions {
                find_unused_parameters: self.find_unused_parameters,
                ..Default::default()
            })
    }
}
