//! Stopping a run cleanly. While [`Trainer::fit`](crate::fit::Trainer::fit) runs, an interrupt
//! (Ctrl-C in a terminal, SIGINT from a launcher or a Jupyter kernel interrupt sent as a
//! signal), a call to [`request_stop`] or a file named `STOP` in the run's output folder ends
//! the run after the current optimizer step: a checkpoint is written and `fit` returns `Ok`
//! with [`FitReport::interrupted`](crate::fit::FitReport::interrupted) set. A second Ctrl-C while
//! the first is being honoured ends the process the usual way.
//!
//! SIGTERM (a Slurm time limit, `scancel`, torchrun passing its own SIGTERM on) and SIGUSR1
//! (Slurm's `--signal=USR1@N` notice) stop the run the same way, and a second SIGTERM or
//! SIGUSR1 while the stop is under way is ignored, so the checkpoint is finished before the
//! process ends (the examples then exit with status 99, or requeue the Slurm job first:
//! [`FitConfig::requeue`](crate::fit::FitConfig::requeue)).
//!
//! In a Jupyter kernel started by `scripts/kernel/trainbook-kernel` (which sets
//! [`KERNEL_ENV`]), a kernel interrupt outside `fit` ends the process that runs the cells, as
//! evcxr's own interrupt does (evcxr starts a fresh one; the variables are lost), and the kernel
//! script decides that by whether the process catches SIGINT. So there, once a `fit` has run,
//! its SIGINT handler stays installed between runs and ends the process itself when no run is
//! watching: an interrupt honoured by a `fit` that returns before the script looks can never
//! be mistaken for one that nothing caught.
//!
//! In a multi-rank job every rank must stop at the same step: a request seen by any rank at
//! step k stops every rank after step k+1, through a tiny all-reduce on the CPU that runs while
//! step k+1 trains (`fit::agreement`: no per-step host sync of the GPU); a single process stops
//! after the step in which it was asked.
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::dist::Dist;
use crate::fit::stop::agreement::StopAgreement;
use crate::fit::stop::deadline::{Deadline, MAX_TIME};
use crate::Result;

static REQUESTED: AtomicBool = AtomicBool::new(false);

/// Asks the running [`Trainer::fit`](crate::fit::Trainer::fit) of this process to stop after its
/// current step (as Ctrl-C does); for example from another thread or a callback.
pub fn request_stop() {
    REQUESTED.store(true, Ordering::SeqCst);
}

/// Where and when a run was stopped early.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Interruption {
    /// The epoch in progress (0-based).
    pub epoch: u64,
    /// Batches of that epoch done.
    pub batches_done: u64,
    /// The checkpoint written at that point (resume continues from it).
    pub checkpoint: PathBuf,
    /// What asked for the stop ("SIGINT", "SIGTERM", "SIGUSR1", "max_time", "request_stop",
    /// the stop file's path; on a rank that was not asked itself "SIGTERM (another rank)",
    /// "SIGUSR1 (another rank)", "max_time (another rank)" or "another rank").
    pub reason: String,
    /// Whether rank 0 requeued the Slurm job after the checkpoint
    /// ([`FitConfig::requeue`](crate::fit::FitConfig::requeue)).
    #[serde(default)]
    pub requeued: bool,
}

/// The exit status of the examples after a run stopped by SIGTERM, SIGUSR1 or `max_time` (on
/// any rank):
/// the checkpoint is written, and running the same command again (resume on) continues the
/// run. Slurm records it as the job's exit code; torchrun as a worker's failure.
pub const PREEMPTED_EXIT_CODE: i32 = 99;

impl Interruption {
    /// Whether the stop came from SIGTERM or SIGUSR1, on this rank or another, or from
    /// [`max_time`](crate::fit::FitConfig::max_time): pre-emption, a time limit or `scancel`
    /// rather than a user's Ctrl-C, stop file or `request_stop`.
    pub fn preempted(&self) -> bool {
        ["SIGTERM", "SIGUSR1", MAX_TIME].iter().any(|r| self.reason.starts_with(r))
    }

    /// Once its checkpoint is complete: the main rank removes the stop file, every rank says
    /// where the run stopped, and (last: it ends a Slurm job at once) the job is requeued when
    /// `requeue` asks for it ([`requeue_after`](crate::fit::stop::requeue::requeue_after)).
    pub(crate) fn announce(&mut self, dist: &Dist, stop_file: &Path, requeue: bool) {
        if dist.is_main() {
            let _ = std::fs::remove_file(stop_file);
        }
        dist.println(format!(
            "interrupted ({}) in epoch {} after {} batches: checkpoint {}; run again with resume \
             on to continue from it",
            self.reason,
            self.epoch + 1,
            self.batches_done,
            self.checkpoint.display()
        ));
        self.requeued = requeue && crate::fit::stop::requeue::requeue_after(dist, &self.reason);
    }
}

/// The signals that stop a run: SIGINT (Ctrl-C, a kernel interrupt), SIGTERM (Slurm's time
/// limit or `scancel`, torchrun passing on its own SIGTERM) and SIGUSR1 (Slurm's
/// `--signal=USR1@N` warning ahead of the limit).
pub const STOP_SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGUSR1];

/// The name of a stop signal, as the [`Interruption::reason`] gives it.
pub fn signal_name(signal: libc::c_int) -> &'static str {
    match signal {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGUSR1 => "SIGUSR1",
        _ => "a signal",
    }
}

/// The environment variable that `scripts/kernel/trainbook-kernel` sets for the kernel and the
/// process that runs the cells: there, SIGINT's handler stays installed between runs (see the
/// module's header).
pub const KERNEL_ENV: &str = "TRAINBOOK_KERNEL";

/// Whether this process runs a Jupyter kernel's cells ([`KERNEL_ENV`] set and not empty).
fn in_kernel() -> bool {
    static IN_KERNEL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *IN_KERNEL.get_or_init(|| std::env::var_os(KERNEL_ENV).is_some_and(|v| !v.is_empty()))
}

/// The runs watching now (a copy of `WATCHERS`' count that the signal handler can read).
static WATCHING: AtomicUsize = AtomicUsize::new(0);

/// Ends the process by SIGINT, as if no handler were installed.
fn die_by_sigint() {
    // SAFETY: signal() and raise() are async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_DFL);
        libc::raise(libc::SIGINT);
    }
}

extern "C" fn on_signal(signal: libc::c_int) {
    // Only async-signal-safe work here: atomics, and on a second Ctrl-C (or, in a kernel, a
    // Ctrl-C while no run watches) the default action restored and the signal raised again.
    if signal == libc::SIGINT && WATCHING.load(Ordering::SeqCst) == 0 {
        die_by_sigint();
        return;
    }
    if !REQUESTED.swap(true, Ordering::SeqCst) {
        SIGNAL.store(signal, Ordering::SeqCst);
    } else if signal == libc::SIGINT {
        die_by_sigint();
    }
    // A second SIGTERM or SIGUSR1 (Slurm's time limit after its USR1 warning, a launcher
    // repeating itself) is ignored: the stop under way finishes its checkpoint; SIGKILL, which
    // no handler sees, still ends the process at once, and the checkpoint before stays intact
    // since every checkpoint is written to a temporary folder and renamed into place.
}

/// The signal that asked for the stop (0: none, the request came from `request_stop`).
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// The runs watching at once (the ranks of a `spawn` each run `fit` in a thread) and the
/// actions the first one replaced (one per [`STOP_SIGNALS`]): installed by the first, restored
/// by the last (in a kernel, SIGINT's is kept: see the module's header).
type Saved = [Option<libc::sigaction>; 3];
static WATCHERS: Mutex<(usize, Saved)> = Mutex::new((0, [None, None, None]));

fn install_handlers() {
    let mut watchers = WATCHERS.lock().unwrap_or_else(PoisonError::into_inner);
    watchers.0 += 1;
    WATCHING.store(watchers.0, Ordering::SeqCst);
    if watchers.0 > 1 {
        return;
    }
    for (saved, &signal) in watchers.1.iter_mut().zip(&STOP_SIGNALS) {
        // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value; the handler only
        // touches atomics (see on_signal), and the previous action is restored by the last
        // watcher.
        *saved = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            (libc::sigaction(signal, &action, &mut old) == 0).then_some(old)
        };
    }
}

fn restore_handlers() {
    let mut watchers = WATCHERS.lock().unwrap_or_else(PoisonError::into_inner);
    watchers.0 = watchers.0.saturating_sub(1);
    if watchers.0 == 0 {
        for (saved, &signal) in watchers.1.iter_mut().zip(&STOP_SIGNALS) {
            if signal == libc::SIGINT && in_kernel() {
                continue; // the handler stays; it ends the process while no run watches
            }
            if let Some(old) = saved.take() {
                // SAFETY: restores the action that was installed before the first watcher.
                unsafe {
                    libc::sigaction(signal, &old, std::ptr::null_mut());
                }
            }
        }
    }
    // After the restore: outside a kernel the handler is gone before it could see no watcher.
    WATCHING.store(watchers.0, Ordering::SeqCst);
}

/// Watches for a stop request during one run: installs the handlers of [`STOP_SIGNALS`]
/// (restoring the previous ones when the last watcher is dropped), knows the run's stop file,
/// and in a multi-rank run makes the ranks agree (`StopAgreement`).
pub(crate) struct StopWatch {
    stop_file: PathBuf,
    is_main: bool,
    agreement: StopAgreement,
    /// When `max_time` runs out.
    deadline: Option<Deadline>,
}

impl StopWatch {
    /// Starts watching; a request left over from an earlier run is forgotten (on the main
    /// rank, which alone looks at the stop file, a stale `OUT/STOP` is removed).
    pub(crate) fn start(dist: &Dist, out: &Path, max_time: Option<Duration>) -> StopWatch {
        let stop_file = out.join("STOP");
        if dist.is_main() && stop_file.exists() {
            dist.println(format!("removing {} left by an earlier run", stop_file.display()));
            let _ = std::fs::remove_file(&stop_file);
        }
        if WATCHERS.lock().unwrap_or_else(PoisonError::into_inner).0 == 0 {
            REQUESTED.store(false, Ordering::SeqCst);
            SIGNAL.store(0, Ordering::SeqCst);
        }
        install_handlers();
        let deadline = max_time.map(Deadline::after);
        let agreement = StopAgreement::new(dist);
        StopWatch { stop_file, is_main: dist.is_main(), agreement, deadline }
    }

    /// The stop file of this run (`OUT/STOP`).
    pub(crate) fn stop_file(&self) -> &Path {
        &self.stop_file
    }

    /// Why this rank wants to stop, if it does.
    fn local_reason(&self) -> Option<String> {
        if REQUESTED.load(Ordering::SeqCst) {
            let how = match SIGNAL.load(Ordering::SeqCst) {
                0 => "request_stop",
                signal => signal_name(signal),
            };
            return Some(how.to_string());
        }
        if self.deadline.as_ref().is_some_and(Deadline::passed) {
            return Some(MAX_TIME.to_string());
        }
        (self.is_main && self.stop_file.exists()).then(|| self.stop_file.display().to_string())
    }

    /// Called after every optimizer step: whether all ranks stop now, and why. A single
    /// process stops after the step in which it was asked; in a multi-rank run a request seen
    /// by any rank at step k stops every rank after step k+1 (`StopAgreement`).
    pub(crate) fn after_step(&mut self, dist: &Dist) -> Result<Option<String>> {
        let reason = self.local_reason();
        if dist.world_size() == 1 {
            return Ok(reason);
        }
        self.agreement.after_step(dist, reason)
    }

    /// Waits for the agreement still in flight (every rank started it): call once the run's
    /// last step is done, before the ranks' next collective elsewhere.
    pub(crate) fn finish(&mut self, dist: &Dist) -> Result<()> {
        self.agreement.finish(dist)
    }
}

impl Drop for StopWatch {
    fn drop(&mut self) {
        restore_handlers();
    }
}
