//! The training loop: optimizers with checkpointable state, LR schedules, loss and metrics.
//!
//! Filled by the models/training issue; nothing here yet.
