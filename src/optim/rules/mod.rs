//! The update rules beyond SGD and Adam, one file each, as [`UpdateRule`](super::UpdateRule)s with
//! `Optimizer` constructors: RMSprop, NAdam and RAdam, Adagrad, Adadelta and Adamax, each
//! torch.optim's single-tensor loop (torch 2.13) line for line with torch's defaults, and what they
//! share (`common.rs`).
mod adadelta;
mod adagrad;
mod adamax;
mod common;
mod nadam;
mod radam;
mod rmsprop;

pub use adadelta::Adadelta;
pub use adagrad::Adagrad;
pub use adamax::Adamax;
pub use nadam::NAdam;
pub use radam::RAdam;
pub use rmsprop::RMSprop;
