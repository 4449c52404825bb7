//! Early stopping, a part of the run behind `Trainer::fit` with Lightning's `EarlyStopping`
//! semantics: after every validation the [`Monitor`]ed metric either improves on the best so
//! far by more than `min_delta` (the wait starts over) or the wait grows; the run stops once it
//! has waited `patience` epochs, or at once on a non-finite value (`check_finite`). Its state
//! (best value, wait, whether it stopped) goes into every checkpoint, so a resumed run stops
//! where the uninterrupted one does, and a run that stopped early stays finished.
use serde::{Deserialize, Serialize};

use crate::train::{Mode, Monitor};
use crate::{Error, Result};

/// Stops training when the monitored metric stops improving.
///
/// ```
/// use trainbook::fit::EarlyStopping;
/// use trainbook::train::Monitor;
/// let mut es = EarlyStopping::new(Monitor::ValLoss, 2).min_delta(0.01);
/// assert!(!es.update(1.0)); // the first value is the best so far
/// assert!(!es.update(0.995)); // not better by more than 0.01: waited 1 epoch
/// assert!(es.update(0.999)); // waited 2 = patience: stop
/// assert_eq!(es.best(), Some(1.0));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EarlyStopping {
    /// The metric watched (its [`Monitor::mode`] says which direction is better).
    pub monitor: Monitor,
    /// Epochs without improvement before the run stops (Lightning's default 3).
    pub patience: u64,
    /// The least change that counts as an improvement (default 0).
    pub min_delta: f64,
    best: Option<f64>,
    wait: u64,
    stopped: bool,
}

impl EarlyStopping {
    /// Watches `monitor`, stopping after `patience` epochs without improvement.
    pub fn new(monitor: Monitor, patience: u64) -> EarlyStopping {
        EarlyStopping { monitor, patience, min_delta: 0.0, best: None, wait: 0, stopped: false }
    }

    /// Only a change larger than `delta` (its absolute value) counts as an improvement.
    pub fn min_delta(mut self, delta: f64) -> Self {
        self.min_delta = delta.abs();
        self
    }

    /// An error naming the setting when patience is 0 or `min_delta` is not finite.
    pub fn validate(&self) -> Result<()> {
        if self.patience == 0 || !self.min_delta.is_finite() {
            return Err(Error::InvalidArgument(format!(
                "early stopping: patience must be at least 1 and min_delta finite (got \
                 patience {}, min_delta {})",
                self.patience, self.min_delta
            )));
        }
        Ok(())
    }

    /// Takes the epoch's monitored value; `true` when the run should stop now.
    pub fn update(&mut self, value: f64) -> bool {
        if !value.is_finite() {
            self.stopped = true;
            return true;
        }
        let improved = match (self.best, self.monitor.mode()) {
            (None, _) => true,
            (Some(best), Mode::Min) => value < best - self.min_delta,
            (Some(best), Mode::Max) => value > best + self.min_delta,
        };
        if improved {
            self.best = Some(value);
            self.wait = 0;
        } else {
            self.wait += 1;
        }
        self.stopped = self.wait >= self.patience;
        self.stopped
    }

    /// The best monitored value so far.
    pub fn best(&self) -> Option<f64> {
        self.best
    }

    /// Epochs waited since the last improvement.
    pub fn wait(&self) -> u64 {
        self.wait
    }

    /// Whether the run was stopped (it stays finished when resumed).
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// Continues from a checkpoint's state (best, wait, stopped); the settings stay this
    /// run's own. An error naming the checkpoint's field when it cannot be read.
    pub(crate) fn restore(&mut self, saved: &serde_json::Value) -> Result<()> {
        let saved: EarlyStopping = serde_json::from_value(saved.clone()).map_err(|e| {
            Error::Checkpoint(format!("early stopping state in the checkpoint: {e}"))
        })?;
        if saved.monitor == self.monitor {
            (self.best, self.wait, self.stopped) = (saved.best, saved.wait, saved.stopped);
        }
        Ok(())
    }

    /// The line a run prints when it stops.
    pub(crate) fn describe(&self, epoch: u64) -> String {
        match self.best {
            Some(best) if self.wait >= self.patience => format!(
                "early stopping after epoch {epoch}: {} has not improved on {best:.4} by more \
                 than {} for {} epochs",
                self.monitor, self.min_delta, self.patience
            ),
            _ => format!("early stopping after epoch {epoch}: {} is not finite", self.monitor),
        }
    }
}

/// Early stopping's counters as a part of a run's checkpoints, under the key `early_stopping`
/// (Lightning's `EarlyStopping.state_dict`: best, wait, stopped).
impl crate::stateful::Stateful for EarlyStopping {
    fn state_key(&self) -> String {
        "early_stopping".into()
    }
    fn state_dict(&self) -> Result<crate::stateful::PartState> {
        crate::stateful::PartState::of_serde(self)
    }
    fn load_state_dict(&mut self, state: crate::stateful::PartState) -> Result<()> {
        self.restore(&state.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accuracy_must_rise_and_a_nan_stops_at_once() {
        let mut es = EarlyStopping::new(Monitor::ValAcc, 2);
        assert!(!es.update(0.5) && !es.update(0.6) && !es.update(0.6));
        assert_eq!((es.best(), es.wait()), (Some(0.6), 1));
        assert!(!es.update(0.7), "an improvement resets the wait");
        assert!(!es.update(0.2) && es.update(0.3));
        assert!(
            es.describe(5).contains("val_acc has not improved on 0.7000"),
            "{}",
            es.describe(5)
        );
        let mut nan = EarlyStopping::new(Monitor::ValLoss, 10);
        assert!(nan.update(f64::NAN) && nan.stopped());
        assert!(nan.describe(0).contains("not finite"));
    }

    #[test]
    fn the_state_round_trips_and_bad_settings_are_errors() {
        let mut es = EarlyStopping::new(Monitor::ValLoss, 3);
        es.update(2.0);
        es.update(2.5);
        let mut fresh = EarlyStopping::new(Monitor::ValLoss, 3);
        fresh.restore(&serde_json::to_value(&es).unwrap()).unwrap();
        assert_eq!(fresh, es);
        let other = EarlyStopping::new(Monitor::ValAcc, 3);
        fresh.restore(&serde_json::to_value(&other).unwrap()).unwrap();
        assert_eq!(fresh, es, "another monitor's state is not taken over");
        assert!(fresh.restore(&serde_json::json!({"monitor": 3})).is_err());
        assert!(EarlyStopping::new(Monitor::ValLoss, 0).validate().is_err());
        assert!(EarlyStopping::new(Monitor::ValLoss, 1).min_delta(f64::NAN).validate().is_err());
    }
}
