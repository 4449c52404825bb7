//! `Trainer::fit` as a whole: checkpoints (damaged, killed mid-write) and resume, stopping on
//! signals and stop files and the ranks agreeing on the step, early stopping, step logs and
//! callbacks, freezing the backbone, and a run on a machine without a font.
//!
//! One module per former test binary (`tests/fit/<module>.rs`); a test's full name is
//! `<module>::<test>`. Every test first takes its module's turn (`common::module_turn`), so that
//! under `cargo test` the modules run one after another, as their binaries did, while the tests of
//! one module still run side by side.
#[path = "../common/mod.rs"]
mod common;

mod acting_callbacks;
mod batch_limits;
mod callback_state;
mod checkpoint;
mod divergence;
mod early_stopping;
mod elastic_resume;
mod fit_interrupt;
mod fit_resume;
mod fit_without_font;
mod freeze_epochs;
mod gradient_noise;
mod own_metrics;
mod predict_stage;
mod step_logs;
mod stop_agreement;
mod test_stage;
mod val_every_steps;
mod weight_trail;
