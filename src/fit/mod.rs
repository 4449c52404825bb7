//! A whole training run in one call: [`Trainer`] (a builder with defaults for everything but
//! the model, the optimizer and the data), its settings [`FitConfig`] and its [`FitReport`];
//! a run stops cleanly on Ctrl-C, SIGTERM, SIGUSR1 or a stop file ([`interrupt`], the ranks
//! agreeing through `agreement`), can requeue its Slurm job then ([`requeue`]) and, under
//! trainbook's Ray and Dask launchers, reports each epoch to the launcher ([`report`]); it can
//! stop early when the monitored metric stops improving ([`EarlyStopping`]).
mod agreement;
mod config;
mod early_stopping;
pub mod interrupt;
pub mod report;
pub mod requeue;
mod run;
mod trainer;

pub use config::{FitConfig, FitReport};
pub use early_stopping::EarlyStopping;
pub use interrupt::{request_stop, Interruption};
pub use trainer::Trainer;
