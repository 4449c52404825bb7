//! torch.optim's floor, beside the models and below the training loop: the [`Optimizer`] with
//! torch.optim's update rules, defaults and checkpointable state (what it computes,
//! [`OptimizerKind`], and how, [`Kernels`]; its per-parameter state and [`OptimizerMeta`]; the
//! single-tensor and multi-tensor updates and the libtorch kernels behind the latter); update
//! rules beyond SGD and Adam ([`UpdateRule`]: RMSprop, NAdam, RAdam, Adagrad, Adadelta, Adamax,
//! or one's own) and torch's ops with their scalar arguments ([`ops`]); the learning-rate
//! schedules of `torch.optim.lr_scheduler` (`schedule/`, behind [`LrSchedule`]); and stochastic
//! weight averaging, `torch.optim.swa_utils` ([`SwaModel`], [`update_bn`], [`SWALR`]).
//!
//! The training loop (`trainbook::train`) and the run (`trainbook::fit`) build on these; the
//! names are also re-exported by `trainbook::train`, where they lived before.
mod group_settings;
mod kernels;
mod kind;
mod momentum;
mod multi_tensor;
pub mod ops;
mod optimizer;
mod param_group;
mod rule;
mod rule_optimizer;
mod rules;
mod schedule;
mod single_tensor;
mod state;
mod state_dict;
mod swa;
mod torch_state;

pub use kind::{Kernels, OptimizerKind};
pub use optimizer::Optimizer;
pub use param_group::ParamGroup;
pub use rule::{RuleState, RuleStep, SharedRule, UpdateRule};
pub use rules::{Adadelta, Adagrad, Adamax, NAdam, RAdam, RMSprop};
pub use schedule::{
    Anneal, Cadence, ChainedScheduler, ConstantLR, CosineAnnealingLR, CosineAnnealingWarmRestarts,
    CyclicLR, CyclicMode, ExponentialLR, LambdaLR, LinearLR, LrLambda, LrSchedule, Mode,
    MomentumCycle, MultiStepLR, MultiplicativeLR, OneCycleLR, PolynomialLR, ReduceLROnPlateau,
    SequentialLR, StepLR, Validation, SWALR,
};
pub use state::OptimizerMeta;
pub use swa::{update_bn, SwaModel};
