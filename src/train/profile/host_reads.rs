//! The count of the training loop's reads from the device to the host: each waits for the device
//! to finish the queued work, so the loop makes them only when progress is shown, a checkpoint is
//! written or the epoch ends, never per step. [`host_reads`] lets a test check that.
use std::sync::atomic::{AtomicU64, Ordering};

static HOST_READS: AtomicU64 = AtomicU64::new(0);

/// How many times, since the process started, the training loop has read its running metrics
/// (or GradScaler its inf flag) back from the device (each read waits for the device to finish
/// the queued work).
///
/// ```
/// let before = trainbook::train::host_reads();
/// // ... train an epoch with progress off ...
/// assert!(trainbook::train::host_reads() >= before);
/// ```
pub fn host_reads() -> u64 {
    HOST_READS.load(Ordering::Relaxed)
}

/// Counts a read of the device that the training loop makes (the running metrics' read, GradScaler's inf flag, the clipping norm's mean).
pub(crate) fn count_host_read() {
    HOST_READS.fetch_add(1, Ordering::Relaxed);
}
