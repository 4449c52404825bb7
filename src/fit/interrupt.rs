//! Stopping a run cleanly. While [`Trainer::fit`](super::Trainer::fit) runs, an interrupt
//! (Ctrl-C in a terminal, SIGINT from a launcher or a Jupyter kernel interrupt sent as a
//! signal), a call to [`request_stop`] or a file named `STOP` in the run's output folder ends
//! the run after the current optimizer step: a checkpoint is written and `fit` returns `Ok`
//! with [`FitReport::interrupted`](super::FitReport::interrupted) set. A second Ctrl-C while
//! the first is being honoured ends the process the usual way.
//!
//! In a multi-rank job every rank must stop at the same step, so the ranks agree on it with a
//! small all-reduce every [`AGREE_EVERY`] steps (a single process checks every step).
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::dist::Dist;
use crate::Result;

/// Steps between the ranks' agreement on stopping (each agreement is one small collective).
pub const AGREE_EVERY: u64 = 10;

static REQUESTED: AtomicBool = AtomicBool::new(false);

/// Asks the running [`Trainer::fit`](super::Trainer::fit) of this process to stop after its
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
    /// What asked for the stop ("SIGINT", "request_stop", or the stop file's path).
    pub reason: String,
}

extern "C" fn on_sigint(_signal: libc::c_int) {
    // Only async-signal-safe work here: an atomic swap, and on a second interrupt the default
    // action restored and the signal raised again.
    SIGNALLED.store(true, Ordering::SeqCst);
    if REQUESTED.swap(true, Ordering::SeqCst) {
        // SAFETY: signal() and raise() are async-signal-safe.
        unsafe {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::raise(libc::SIGINT);
        }
    }
}

static SIGNALLED: AtomicBool = AtomicBool::new(false);

/// The runs watching at once (the ranks of a `spawn` each run `fit` in a thread) and the
/// action the first one replaced: installed by the first, restored by the last.
static WATCHERS: Mutex<(usize, Option<libc::sigaction>)> = Mutex::new((0, None));

fn install_handler() {
    let mut watchers = WATCHERS.lock().unwrap_or_else(PoisonError::into_inner);
    watchers.0 += 1;
    if watchers.0 > 1 {
        return;
    }
    // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value; the handler only
    // touches atomics (see on_sigint), and the previous action is restored by the last watcher.
    watchers.1 = unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigint as *const () as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        (libc::sigaction(libc::SIGINT, &action, &mut old) == 0).then_some(old)
    };
}

fn restore_handler() {
    let mut watchers = WATCHERS.lock().unwrap_or_else(PoisonError::into_inner);
    watchers.0 = watchers.0.saturating_sub(1);
    if watchers.0 == 0 {
        if let Some(old) = watchers.1.take() {
            // SAFETY: restores the action that was installed before the first watcher.
            unsafe {
                libc::sigaction(libc::SIGINT, &old, std::ptr::null_mut());
            }
        }
    }
}

/// Watches for a stop request during one run: installs the SIGINT handler (restoring the
/// previous one when the last watcher is dropped) and knows the run's stop file.
pub(crate) struct StopWatch {
    stop_file: PathBuf,
    is_main: bool,
    steps: u64,
}

impl StopWatch {
    /// Starts watching; a request left over from an earlier run is forgotten (on the main
    /// rank, which alone looks at the stop file, a stale `OUT/STOP` is removed).
    pub(crate) fn start(dist: &Dist, out: &Path) -> StopWatch {
        let stop_file = out.join("STOP");
        if dist.is_main() && stop_file.exists() {
            dist.println(format!("removing {} left by an earlier run", stop_file.display()));
            let _ = std::fs::remove_file(&stop_file);
        }
        if WATCHERS.lock().unwrap_or_else(PoisonError::into_inner).0 == 0 {
            REQUESTED.store(false, Ordering::SeqCst);
            SIGNALLED.store(false, Ordering::SeqCst);
        }
        install_handler();
        StopWatch { stop_file, is_main: dist.is_main(), steps: 0 }
    }

    /// The stop file of this run (`OUT/STOP`).
    pub(crate) fn stop_file(&self) -> &Path {
        &self.stop_file
    }

    /// Why this rank wants to stop, if it does.
    fn local_reason(&self) -> Option<String> {
        if REQUESTED.load(Ordering::SeqCst) {
            let how = if SIGNALLED.load(Ordering::SeqCst) { "SIGINT" } else { "request_stop" };
            return Some(how.to_string());
        }
        (self.is_main && self.stop_file.exists()).then(|| self.stop_file.display().to_string())
    }

    /// Called after every optimizer step: whether all ranks stop now, and why. Ranks agree
    /// every [`AGREE_EVERY`] steps (any rank asking stops all); a single process every step.
    pub(crate) fn after_step(&mut self, dist: &Dist) -> Result<Option<String>> {
        self.steps += 1;
        let reason = self.local_reason();
        if dist.world_size() == 1 {
            return Ok(reason);
        }
        if self.steps % AGREE_EVERY != 0 {
            return Ok(None);
        }
        let askers = dist.sum_f64(&[reason.is_some() as u8 as f64])?[0];
        Ok((askers > 0.0).then(|| reason.unwrap_or_else(|| "another rank".to_string())))
    }
}

impl Drop for StopWatch {
    fn drop(&mut self) {
        restore_handler();
    }
}
