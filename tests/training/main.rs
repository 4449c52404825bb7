//! The training step and what it is made of, against PyTorch where PyTorch has it: mixed
//! precision and GradScaler, gradient clipping, param groups, learning-rate schedules, losses
//! and metrics, the EMA of the weights, the training loop's device reads, the regression
//! example and the two-input example (a step of its own) against the same loop in PyTorch.
//!
//! One module per former test binary (`tests/training/<module>.rs`); a test's full name is
//! `<module>::<test>`. Every test first takes its module's turn (`common::module_turn`), so that
//! under `cargo test` the modules run one after another, as their binaries did, while the tests of
//! one module still run side by side.
#[path = "../common/mod.rs"]
mod common;

mod amp;
mod anomaly;
mod backends;
mod batch_size_find;
mod class_metrics;
mod cuda_graphs;
mod ema;
mod grad_clip;
mod losses;
mod lr_find;
mod param_groups;
mod profiler;
mod regression;
mod schedules;
mod schedules_in_fit;
mod swa;
mod training_loop;
mod two_inputs;
