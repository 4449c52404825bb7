//! A run's time limit ([`FitConfig::max_time`](crate::fit::FitConfig::max_time), Lightning's
//! `max_time`): when it has passed, the run stops after its current step as SIGTERM stops it,
//! with the reason [`MAX_TIME`].
use std::time::{Duration, Instant};

/// The reason of a stop by [`FitConfig::max_time`](crate::fit::FitConfig::max_time).
pub const MAX_TIME: &str = "max_time";

/// The moment a run's `max_time` runs out, counted from when it was made.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Deadline(Instant);

impl Deadline {
    /// `limit` from now.
    pub(crate) fn after(limit: Duration) -> Deadline {
        Deadline(Instant::now() + limit)
    }
    /// Whether the time is up.
    pub(crate) fn passed(&self) -> bool {
        Instant::now() >= self.0
    }
}
