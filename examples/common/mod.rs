//! The command-line flags and the set-up that the examples share (each example includes this
//! file with `mod common;`; Cargo builds no example of its own from a folder without main.rs).
//!
//! - [`RunArgs`], in every example: `--device`, `--seed`, `--workers`, `--no-resume`,
//!   `--precision`, `--channels-last`, with [`RunArgs::dist`] (join the launcher's process
//!   group) and [`RunArgs::trainer`] (a [`Trainer`] with those settings).
//! - [`FitArgs`], in mnist and designsafe: `--save-every`, `--save-every-steps`, `--keep-last`,
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

use clap::Args;
use trainbook::prelude::*;

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
}

impl RunArgs {
    /// Joins the process group the launcher describes (torchrun's, or the Ray or Dask
    /// launcher's environment), on `--device`; a world of one without a launcher.
    pub fn dist(&self) -> trainbook::Result<Dist> {
        Dist::init_with(DistOptions::default().with_device_name(&self.device)?)
    }

    /// A [`Trainer`] on `dist` that resumes unless `--no-resume`, records `--seed` in its
    /// checkpoints and trains in `--precision`, channels_last with `--channels-last`. The
    /// example adds its epochs, output folder, schedule and recorded config.
    pub fn trainer<'d>(&self, dist: &'d Dist) -> Trainer<'d> {
        Trainer::new(dist)
            .resume(!self.no_resume)
            .seed(self.seed)
            .precision(self.precision)
            .channels_last(self.channels_last)
    }
}

/// Checkpoint cadence, gradient accumulation and DDP's unused-parameter search: flags of mnist
/// and designsafe. tiny_imagenet and dogs keep the [`Trainer`]'s defaults, which are these
/// flags' defaults (tiny_imagenet has its own --save-every-steps).
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
