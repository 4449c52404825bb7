#![warn(missing_docs)]
//! trainbook: train image classifiers step by step in Jupyter notebooks (the evcxr Rust kernel)
//! and run the very same code as multi-process, multi-GPU distributed jobs under torchrun.
//!
//! The modules, in the course's reading order (each one's header says its scope):
//! - [`data`], [`transforms`], [`models`]: data sets, loaders and samplers; torchvision's
//!   transforms; the MNIST network and the ResNet family.
//! - [`optim`]: torch.optim's optimizers, learning-rate schedules and weight averaging (SWA).
//! - [`train`]: one epoch (the step, mixed precision, metrics), built on [`optim`].
//! - [`dist`]: the launcher's environment, c10d process groups (Gloo, NCCL) and `Ddp`.
//! - [`checkpoint`]: atomic, checksummed checkpoints written in the background.
//! - [`torch_file`]: files of PyTorch's `torch.save` (state dicts, checkpoints), read and written;
//!   [`hub`]: torch.hub's cache of downloaded weights, shared with PyTorch.
//! - [`trail`]: the weight trail, checksums of the weights every N steps, to compare two runs.
//! - [`fit`]: the whole training run (resume, epochs, checkpoints, logs, plots) in one call.
//! - [`interpret`]: views that explain a trained classifier (the top losses, the classes it
//!   confuses most).
//! - [`launch`]: a notebook's closure as ranks ([`launch::spawn`]), and jobs under torchrun,
//!   Ray or Dask.
//! - [`figures`] (also as [`notebook`]): figures shown inline in Jupyter, or saved as files outside it;
//!   [`progress`]: progress bars; [`export`]: a notebook as a standalone program;
//!   [`programs`]: how Python and torchrun are found; [`prelude`]: one import for a notebook;
//!   [`cuda`]: the GPU's peak memory, as `torch.cuda` reports it.
//!
//! Underneath, crate-private: the C++ shim's error convention and versions (`shim`), libtorch's
//! random generators and the turns thread ranks take on them (`rng`), and evcxr's rich-output
//! protocol (`display`).
pub mod checkpoint;
pub mod cuda;
pub mod data;
mod display;
pub mod dist;
mod error;
pub mod export;
pub mod figures;
pub mod fit;
pub mod hub;
pub mod interpret;
pub mod launch;
pub mod models;
pub mod optim;
pub mod prelude;
pub mod programs;
pub mod progress;
mod rng;
mod shim;
mod stateful;
pub mod torch_file;
pub mod trail;
pub mod train;
pub mod transforms;

pub use error::{Error, Result, WithPath};
pub use shim::{versions, Versions};
pub use stateful::{check_state_key, PartState, Stateful};

/// The README's Rust snippets, compiled as doctests so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The book's pages (docs/src, built with mdBook: `make docs`), their Rust snippets compiled as
/// doctests so that they stay true.
#[cfg(doctest)]
mod book {
    #[doc = include_str!("../docs/src/answer-key.md")]
    pub struct AnswerKey;
    #[doc = include_str!("../docs/src/checkpoints.md")]
    pub struct Checkpoints;
    #[doc = include_str!("../docs/src/claims.md")]
    pub struct Claims;
    #[doc = include_str!("../docs/src/contributing.md")]
    pub struct Contributing;
    #[doc = include_str!("../docs/src/course-path.md")]
    pub struct CoursePath;
    #[doc = include_str!("../docs/src/cuda.md")]
    pub struct Cuda;
    #[doc = include_str!("../docs/src/data.md")]
    pub struct Data;
    #[doc = include_str!("../docs/src/distributed.md")]
    pub struct Distributed;
    #[doc = include_str!("../docs/src/gpu-speed.md")]
    pub struct GpuSpeed;
    #[doc = include_str!("../docs/src/instructors.md")]
    pub struct Instructors;
    #[doc = include_str!("../docs/src/install.md")]
    pub struct Install;
    #[doc = include_str!("../docs/src/introduction.md")]
    pub struct Introduction;
    #[doc = include_str!("../docs/src/launching.md")]
    pub struct Launching;
    #[doc = include_str!("../docs/src/layout.md")]
    pub struct Layout;
    #[doc = include_str!("../docs/src/limitations.md")]
    pub struct Limitations;
    #[doc = include_str!("../docs/src/notebooks.md")]
    pub struct Notebooks;
    #[doc = include_str!("../docs/src/performance.md")]
    pub struct Performance;
    #[doc = include_str!("../docs/src/pytorch-files.md")]
    pub struct PytorchFiles;
    #[doc = include_str!("../docs/src/repl.md")]
    pub struct Repl;
    #[doc = include_str!("../docs/src/training-parts.md")]
    pub struct TrainingParts;
    #[doc = include_str!("../docs/src/training.md")]
    pub struct Training;
    #[doc = include_str!("../docs/src/torchvision-recipe.md")]
    pub struct TorchvisionRecipe;
    #[doc = include_str!("../docs/src/troubleshooting.md")]
    pub struct Troubleshooting;
}

/// The tch crate (libtorch bindings), re-exported so notebooks need only `:dep trainbook`.
pub use tch;

/// The figures under the name the notebooks import them by (`trainbook::notebook::...`): the
/// same module as [`figures`].
pub use figures as notebook;
