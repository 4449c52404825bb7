//! The training loop: the per-epoch train/evaluate helpers and the [`Strategy`] they run
//! under, optimizers with checkpointable state (`optim/`), mixed precision (`amp/`), LR
//! schedules, losses for every task, exact metrics, predictions with their confidence, the metrics log, and a
//! deterministic mode.
mod amp;
mod clip;
mod determinism;
mod device_metrics;
mod ema;
mod epoch;
mod epoch_options;
mod log;
mod loss;
mod metrics;
mod optim;
mod predict;
mod schedule;
mod step_listener;
mod step_record;
mod strategy;
mod summary;
mod task_sums;
mod timing;

pub use crate::dist::CommHook;
pub use amp::{GradScaler, GradScalerConfig, GradScalerState, Precision};
pub use clip::{clip_grad_norm, clip_grad_value, total_norm, GradClip};
pub use determinism::{
    determinism, use_deterministic_algorithms, Determinism, CUBLAS_WORKSPACE_CONFIG,
};
pub use device_metrics::{host_reads, DeviceMetrics};
pub use ema::ModelEma;
pub(crate) use epoch::task_of;
pub use epoch::{evaluate, train_epoch, train_epoch_with, EpochSummary};
pub use epoch_options::{EpochOptions, StepInfo};
pub use log::{append_record, history_table, read_records, EpochRecord};
pub use loss::{
    BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, L1Loss, Loss, MSELoss, SharedLoss,
    SmoothL1Loss, Task,
};
pub use metrics::{ConfusionMatrix, Mode, Monitor, RunningMetrics};
pub use optim::{Kernels, Optimizer, OptimizerKind, OptimizerMeta, ParamGroup};
pub use predict::{predict, predictions, Prediction};
pub use schedule::{
    Anneal, Cadence, ChainedScheduler, CosineAnnealingLR, LinearLR, LrSchedule, OneCycleLR,
    ReduceLROnPlateau, SequentialLR, StepLR, Validation,
};
pub use step_listener::StepListener;
pub use step_record::{StepLogging, StepRecord};
pub use strategy::{Ddp, DdpOptions, SingleProcess, Strategy};
pub use timing::{data_wait_note, LOADER_BOUND_FRACTION};

pub use crate::models::named_parameters;
