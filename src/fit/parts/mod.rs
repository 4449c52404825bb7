//! The run's built-in parts that keep state between epochs: early stopping, the frozen
//! backbone's epochs and the learning-rate schedule.
pub(crate) mod early_stopping;
pub(crate) mod freeze;
pub(crate) mod run_schedule;

pub use early_stopping::EarlyStopping;
