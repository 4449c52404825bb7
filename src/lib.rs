#![warn(missing_docs)]
//! trainbook: train image classifiers step by step in Jupyter notebooks (the evcxr Rust kernel)
//! and run the very same code as multi-process, multi-GPU distributed jobs under torchrun.
//!
//! One module per notebook step:
//! - [`dist`]: the launcher's environment and c10d process groups (Gloo, NCCL).
//! - [`notebook`]: showing results inline in Jupyter, or as files outside it.
//! - [`data`], [`transforms`], [`models`], [`train`], [`checkpoint`]: the data pipeline, models,
//!   training loop and checkpoints (see each module's header for its scope).
//! - [`fit`]: the whole training run (resume, epochs, checkpoints, logs, plots) in one call.
pub mod checkpoint;
pub mod data;
pub mod dist;
mod error;
pub mod export;
pub mod fit;
pub mod launch;
pub mod models;
pub mod notebook;
pub mod prelude;
pub mod programs;
pub mod progress;
pub mod train;
pub mod transforms;

pub use error::{Error, Result, WithPath};

/// The README's Rust snippets, compiled as doctests so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
/// The tch crate (libtorch bindings), re-exported so notebooks need only `:dep trainbook`.
pub use tch;

/// Versions of the pieces a trainbook program runs on, for set-up checks and bug reports.
#[derive(Clone, Debug)]
pub struct Versions {
    /// This crate's version.
    pub trainbook: &'static str,
    /// The libtorch headers trainbook's c10d shim was compiled against.
    pub libtorch: &'static str,
    /// Directory of the libtorch shared libraries the binaries were linked with.
    pub libtorch_lib_dir: &'static str,
    /// Whether libtorch sees a usable CUDA device now.
    pub cuda_available: bool,
    /// How many CUDA devices libtorch sees.
    pub cuda_devices: i64,
    /// Whether the shim was built with NCCL (`--features cuda`).
    pub nccl_built_in: bool,
}

/// Reports the versions this build runs on (and whether CUDA is usable right now).
pub fn versions() -> Versions {
    Versions {
        trainbook: env!("CARGO_PKG_VERSION"),
        libtorch: dist::torch_version(),
        libtorch_lib_dir: env!("TRAINBOOK_LIBTORCH_LIB"),
        cuda_available: tch::Cuda::is_available(),
        cuda_devices: tch::Cuda::device_count(),
        nccl_built_in: dist::Backend::Nccl.is_available(),
    }
}

impl std::fmt::Display for Versions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "trainbook {}", self.trainbook)?;
        writeln!(f, "libtorch  {} ({})", self.libtorch, self.libtorch_lib_dir)?;
        writeln!(f, "CUDA      available={} devices={}", self.cuda_available, self.cuda_devices)?;
        write!(f, "NCCL      built in={}", self.nccl_built_in)
    }
}
