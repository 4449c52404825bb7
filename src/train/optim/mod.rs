//! Optimizers with torch.optim's update rules, defaults and checkpointable state: the
//! [`Optimizer`] itself, what it computes ([`OptimizerKind`]) and how ([`Kernels`]), its
//! per-parameter state and [`OptimizerMeta`], the single-tensor and multi-tensor updates, and
//! the libtorch kernels behind the latter.
mod kernels;
mod kind;
mod multi_tensor;
mod optimizer;
mod param_group;
mod single_tensor;
mod state;
mod torch_state;

pub use kind::{Kernels, OptimizerKind};
pub use optimizer::Optimizer;
pub use param_group::ParamGroup;
pub use state::OptimizerMeta;
