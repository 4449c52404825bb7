//! Requeueing a Slurm job that was told to stop: with
//! [`Trainer::requeue`](crate::fit::Trainer::requeue) on, a run stopped by SIGUSR1 (Slurm's
//! `sbatch --signal=USR1@N` notice, N seconds before the time limit) has rank 0 run
//! `scontrol requeue $SLURM_JOB_ID` once the checkpoint is written, as Lightning's SLURM
//! environment does; the job goes back to the queue and, started again, resumes from that
//! checkpoint (Slurm delays its start by about two minutes). `scontrol requeue` ends the
//! running job at once, so it is the run's last act. SIGTERM alone (`scancel`, or a time limit without the notice) does not requeue:
//! a cancelled job stays cancelled. The job must be requeueable (`sbatch --requeue`).
use std::process::Command;

use crate::dist::Dist;

/// The variable Slurm sets to the job's id in a batch job and its steps.
pub const SLURM_JOB_ID: &str = "SLURM_JOB_ID";

/// The Slurm job this process belongs to, if any (`SLURM_JOB_ID`).
pub fn slurm_job_id() -> Option<String> {
    std::env::var(SLURM_JOB_ID).ok().filter(|id| !id.trim().is_empty())
}

/// Rank 0 requeues the Slurm job (`scontrol requeue ID`) when `reason` is SIGUSR1 and the
/// process runs under Slurm; returns whether the job was requeued. A failing `scontrol` is
/// reported on stderr, not as an error: the checkpoint is written, and the job can be
/// submitted again by hand.
pub(crate) fn requeue_after(dist: &Dist, reason: &str) -> bool {
    if !dist.is_main() || !reason.starts_with("SIGUSR1") {
        return false;
    }
    let Some(job) = slurm_job_id() else {
        eprintln!("trainbook: requeue asked for, but SLURM_JOB_ID is not set: not under Slurm");
        return false;
    };
    // Said first: Slurm ends the running job as soon as it is requeued.
    dist.println(format!("requeueing Slurm job {job}: scontrol requeue {job}"));
    match Command::new("scontrol").args(["requeue", &job]).output() {
        Ok(o) if o.status.success() => true,
        Ok(o) => {
            eprintln!(
                "trainbook: scontrol requeue {job} failed ({}): {}",
                o.status,
                String::from_utf8_lossy(&o.stderr).trim()
            );
            false
        }
        Err(e) => {
            eprintln!("trainbook: could not run scontrol requeue {job}: {e}");
            false
        }
    }
}
