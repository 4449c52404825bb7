//! A whole training run in one call: [`Trainer`] (a builder with defaults for everything but
//! the model, the optimizer and the data), its settings [`FitConfig`] and its [`FitReport`].
mod config;
mod run;
mod trainer;

pub use config::{FitConfig, FitReport};
pub use trainer::Trainer;
