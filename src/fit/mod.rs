//! A whole training run in one call: [`Trainer`] (a builder with defaults for everything but
//! the model, the optimizer and the data), its settings [`FitConfig`] and its [`FitReport`];
//! a run stops cleanly on Ctrl-C or a stop file ([`interrupt`]) and, under trainbook's Ray and
//! Dask launchers, reports each epoch to the launcher ([`report`]).
mod config;
pub mod interrupt;
pub mod report;
mod run;
mod trainer;

pub use config::{FitConfig, FitReport};
pub use interrupt::{request_stop, Interruption};
pub use trainer::Trainer;
