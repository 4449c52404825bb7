//! The training loop: optimizers with checkpointable state, LR schedules, loss, exact metrics,
//! the per-epoch train/evaluate helpers, predictions with their confidence and the metrics log.
mod device_metrics;
mod epoch;
mod grad_scaler;
mod kernels;
mod log;
mod loss;
mod metrics;
mod multi_tensor;
mod optim;
mod optim_state;
mod precision;
mod predict;
mod schedule;
mod single_tensor;
mod timing;

pub use device_metrics::{host_reads, DeviceMetrics};
pub use epoch::{
    evaluate, train_epoch, EpochOptions, EpochSummary, LrAfterStep, OnStep, SingleProcess,
    StepHooks, StepInfo,
};
pub use grad_scaler::{GradScaler, GradScalerConfig, GradScalerState};
pub use log::{append_record, read_records, EpochRecord};
pub use loss::CrossEntropyLoss;
pub use metrics::{ConfusionMatrix, RunningMetrics};
pub use optim::{named_parameters, Kernels, Optimizer, OptimizerKind};
pub use optim_state::OptimizerMeta;
pub use precision::Precision;
pub use predict::{predict, predictions, Prediction};
pub use schedule::{
    Anneal, Cadence, CosineAnnealingLR, LinearLR, LrSchedule, Mode, OneCycleLR, ReduceLROnPlateau,
    StepLR, Validation,
};
pub use timing::{data_wait_note, LOADER_BOUND_FRACTION};
