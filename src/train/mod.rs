//! The training loop: optimizers with checkpointable state, LR schedules, loss, exact metrics,
//! the per-epoch train/evaluate helpers and the metrics log.
mod epoch;
mod log;
mod loss;
mod metrics;
mod optim;
mod schedule;

pub use epoch::{evaluate, train_epoch, EpochOptions, EpochSummary, OnStep, SingleProcess, StepHooks, StepInfo};
pub use log::{append_record, read_records, EpochRecord};
pub use loss::CrossEntropyLoss;
pub use metrics::{ConfusionMatrix, RunningMetrics};
pub use optim::{named_parameters, Optimizer, OptimizerKind, OptimizerMeta};
pub use schedule::{CosineAnnealingLR, Mode, ReduceLROnPlateau, StepLR};
