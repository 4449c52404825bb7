//! [`Mode`]: whether a lower or a higher watched value is better (torch's `mode="min"` /
//! `"max"`), for `ReduceLROnPlateau` here and, one floor up, for the run's monitored metric and
//! early stopping.
use serde::{Deserialize, Serialize};

/// Whether a lower (loss) or higher (accuracy) monitored value is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    /// Lower is better (torch's `mode="min"`), e.g. a loss.
    Min,
    /// Higher is better (torch's `mode="max"`), e.g. an accuracy.
    Max,
}
