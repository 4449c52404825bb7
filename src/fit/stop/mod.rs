//! How a run stops before its last epoch: a stop request (Ctrl-C, SIGTERM, SIGUSR1, a stop
//! file, [`request_stop`], the run's `max_time`) that every rank agrees on at the same step, and
//! the Slurm requeue after a stop by SIGUSR1.
pub(crate) mod agreement;
pub(crate) mod deadline;
pub(crate) mod interrupt;
pub(crate) mod requeue;

pub use deadline::MAX_TIME;
pub use interrupt::{
    request_stop, signal_name, Interruption, KERNEL_ENV, PREEMPTED_EXIT_CODE, STOP_SIGNALS,
};
pub use requeue::{slurm_job_id, SLURM_JOB_ID};
