//! Optimizers with torch.optim's update rules, defaults and checkpointable state: the
//! [`Optimizer`] itself, what it computes ([`OptimizerKind`]) and how ([`Kernels`]), its
//! per-parameter state and [`OptimizerMeta`], the single-tensor and multi-tensor updates, and
//! the libtorch kernels behind the latter; update rules beyond SGD and Adam ([`UpdateRule`]:
//! RMSprop, NAdam, RAdam, Adagrad, Adadelta, Adamax, or one's own) and torch's ops with their scalar arguments (`ops`).
mod kernels;
mod kind;
mod momentum;
mod multi_tensor;
pub mod ops;
mod optimizer;
mod param_group;
mod rule;
mod rules;
mod rules_adaptive;
mod single_tensor;
mod state;
mod state_dict;
mod torch_state;

pub use kind::{Kernels, OptimizerKind};
pub use optimizer::Optimizer;
pub use param_group::ParamGroup;
pub use rule::{RuleState, RuleStep, SharedRule, UpdateRule};
pub use rules::{NAdam, RAdam, RMSprop};
pub use rules_adaptive::{Adadelta, Adagrad, Adamax};
pub use state::OptimizerMeta;
