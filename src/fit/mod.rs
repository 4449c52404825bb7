//! A whole training run in one call: [`Trainer`] (a builder with defaults for everything but
//! the model, the optimizer and the data), its settings [`FitConfig`] and its [`FitReport`];
//! the run itself lives in the `run` wing, by its moments (set-up, resume, steps, epochs, end);
//! a run stops cleanly on Ctrl-C, SIGTERM, SIGUSR1 or a stop file (the `stop` wing: the
//! ranks agree on the step), can requeue its Slurm job then and, under trainbook's Ray and Dask
//! launchers, reports each epoch to the launcher (the `callbacks` wing); it can
//! stop early when the monitored metric stops improving ([`EarlyStopping`]), logs every step to
//! `steps.csv` and TensorBoard, can redraw its curves as it trains ([`LiveCurves`]) and calls
//! the user's [`Callback`]s, which may act on the run ([`RunControl`]).
mod callbacks;
mod config;
mod outcome;
mod parts;
mod run;
mod stop;
mod trainer;

pub use callbacks::control::RunControl;
pub use callbacks::gradient_noise::GradientNoise;
pub use callbacks::launcher_report::reports_enabled;
pub use callbacks::live_curves::LiveCurves;
pub use callbacks::step_csv::STEPS_CSV_HEADER;
pub use callbacks::{Callback, Callbacks, FitStart, IntoSharedCallback, SharedCallback};
pub use config::FitConfig;
pub use outcome::FitReport;
pub use parts::EarlyStopping;
pub use run::step_tools::PROFILE_DIR;
pub use stop::{
    request_stop, signal_name, slurm_job_id, Interruption, KERNEL_ENV, MAX_TIME,
    PREEMPTED_EXIT_CODE, SLURM_JOB_ID, STOP_SIGNALS,
};
pub use trainer::{Trainer, TtaView};
