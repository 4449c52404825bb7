//! The training loop: the per-epoch train/evaluate helpers with their options, listener and
//! summaries (the `epoch/` wing) and the [`Strategy`] they run under (`strategy/`), mixed
//! precision (`amp/`), one's own training step (`step.rs`), gradient clipping (`clip.rs`),
//! autograd's anomaly detection (`anomaly.rs`), the learning-rate range test (`lr_find/`), the
//! batch-size finder (`batch_size_find/`), losses for every task, exact metrics, predictions with
//! their confidence, the metrics log, the profiler, and a deterministic mode.
//!
//! Optimizers, learning-rate schedules and stochastic weight averaging live one floor down, in
//! [`crate::optim`]; their names are re-exported here as well (`trainbook::train::Optimizer`
//! still works), for one release.
mod amp;
mod anomaly;
mod backends;
mod batch_size_find;
mod clip;
mod cuda_graph;
mod determinism;
mod ema;
mod epoch;
mod log;
mod loss;
mod lr_find;
mod metrics;
mod predict;
mod profile;
mod restore_point;
mod step;
mod strategy;

pub use crate::dist::CommHook;
pub use crate::optim::{
    ops, Adadelta, Adagrad, Adamax, Kernels, NAdam, Optimizer, OptimizerKind, OptimizerMeta,
    ParamGroup, RAdam, RMSprop, RuleState, RuleStep, SharedRule, UpdateRule,
};
pub use crate::optim::{update_bn, SwaModel};
pub use crate::optim::{
    Anneal, Cadence, ChainedScheduler, ConstantLR, CosineAnnealingLR, CosineAnnealingWarmRestarts,
    CyclicLR, CyclicMode, ExponentialLR, LambdaLR, LinearLR, LrLambda, LrSchedule, MultiStepLR,
    MultiplicativeLR, OneCycleLR, PolynomialLR, ReduceLROnPlateau, SequentialLR, StepLR,
    Validation, SWALR,
};
pub use amp::{GradScaler, GradScalerConfig, GradScalerState, Precision};
pub use anomaly::{is_anomaly_enabled, set_detect_anomaly};
pub(crate) use anomaly::{named as named_anomaly, AnomalyGuard};
pub use backends::{
    cudnn_allow_tf32, float32_matmul_precision, set_cudnn_allow_tf32, set_cudnn_benchmark,
    set_float32_matmul_precision, set_tf32, Float32MatmulPrecision,
};
pub use batch_size_find::{
    find_batch_size, find_batch_size_step, is_oom_error, BatchSizeFind, BatchSizeFindOptions,
    BatchSizeTrial, ScaleMode,
};
pub use clip::{clip_grad_norm, clip_grad_value, total_norm, GradClip};
pub use cuda_graph::{ImageStep, StepGraph, DEFAULT_WARMUP_STEPS};
pub use determinism::{
    determinism, use_deterministic_algorithms, Determinism, CUBLAS_WORKSPACE_CONFIG,
};
pub use ema::{torchvision_ema_decay, EmaCadence, ModelEma};
pub(crate) use epoch::task_of;
pub use epoch::{
    data_wait_note, evaluate, evaluate_step, train_epoch, train_epoch_step, train_epoch_with,
    BeforeOptimizerStep, DeviceMetrics, EpochOptions, EpochSummary, StepInfo, StepListener,
    StepLogging, StepRecord, LOADER_BOUND_FRACTION,
};
pub(crate) use log::own_metric_keys;
pub use log::{append_record, history_table, read_records, EpochRecord};
pub use loss::{
    BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, L1Loss, Loss, MSELoss, SharedLoss,
    SmoothL1Loss, Task,
};
pub use lr_find::{lr_find, lr_find_step, valley, LrFind, LrFindOptions};
pub(crate) use metrics::check_names;
pub use metrics::{
    builtin_metric, Average, ConfusionMatrix, IntoSharedMetric, Metric, MetricName, MetricValue,
    Mode, Monitor, MulticlassAuroc, MulticlassScore, RunningMetrics, SharedMetric,
    AUROC_THRESHOLDS,
};
pub use predict::{predict, predictions, Prediction};
pub(crate) use profile::phase_range;
pub use profile::{
    emit_nvtx, host_reads, is_profiler_enabled, phase, record_function, NvtxRanges,
    ProfileSchedule, Profiler, ProfilerAction, RecordFunction,
};
pub use step::{ModelStep, RunStep, StepBatch, StepOutput, TrainStep};
pub use strategy::{Ddp, DdpOptions, SingleProcess, Strategy};

pub use crate::models::named_parameters;
