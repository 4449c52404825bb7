//! A whole training run in one call: [`Trainer`] (a builder with defaults for everything but
//! the model, the optimizer and the data), its settings [`FitConfig`] and its [`FitReport`];
//! a run stops cleanly on Ctrl-C, SIGTERM, SIGUSR1 or a stop file ([`interrupt`], the ranks
//! agreeing through `agreement`), can requeue its Slurm job then ([`requeue`]) and, under
//! trainbook's Ray and Dask launchers, reports each epoch to the launcher ([`report`]); it can
//! stop early when the monitored metric stops improving ([`EarlyStopping`]), logs every step to
//! `steps.csv` and TensorBoard, can redraw its curves as it trains ([`LiveCurves`]) and calls
//! the user's [`Callback`]s.
mod agreement;
mod callback;
mod config;
mod early_stopping;
mod epoch_line;
mod event_file;
mod finish;
mod freeze;
pub mod interrupt;
mod live_curves;
pub mod report;
pub mod requeue;
mod resume;
mod run;
mod run_schedule;
mod step_csv;
mod tensorboard;
mod trainer;

pub use callback::{Callback, Callbacks, FitStart, SharedCallback};
pub use config::{FitConfig, FitReport};
pub use early_stopping::EarlyStopping;
pub use interrupt::{request_stop, Interruption};
pub use live_curves::LiveCurves;
pub use step_csv::STEPS_CSV_HEADER;
pub use trainer::Trainer;
