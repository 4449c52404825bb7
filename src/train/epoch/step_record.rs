//! Per-optimizer-step records ([`StepRecord`]) for step logs (`steps.csv`, TensorBoard) and
//! callbacks, gathered without a single extra wait for the device.
//!
//! A step's loss and gradient norm are device tensors. They wait in a [`StepBuffer`] inside
//! the epoch's [`DeviceMetrics`](crate::train::DeviceMetrics) and are read together with the running
//! sums whenever those are read anyway (a progress line, a step checkpoint, the epoch's end):
//! one copy for all of them, counted once by [`host_reads`](crate::train::host_reads). Records
//! therefore reach their reader in bursts, each in step order, none lost.
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

use super::metric_sums::{total_len, values_of};
use crate::train::metrics::SharedMetric;

/// One optimizer step of a training epoch, as logged to `steps.csv` and TensorBoard.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// Optimizer steps taken by the run so far, this one included (1 for the first step; the
    /// number in the name of the `step-*` checkpoint written after it).
    pub step: u64,
    /// The epoch, 0-based (as in `metrics.jsonl`).
    pub epoch: u64,
    /// Batches of the epoch done after this step (skipped ones included).
    pub batches_done: usize,
    /// This rank's mean per-sample loss over the step's samples (all micro-batches of an
    /// accumulation window; with a weighted loss, the weighted mean). Not averaged over ranks, as Lightning logs a step's loss by default
    /// (`sync_dist=False`): the epoch's loss in `metrics.jsonl` is the one over all ranks.
    pub loss: f64,
    /// The learning rate the step used.
    pub lr: f64,
    /// With norm clipping: the total gradient norm before clipping (`clip_grad_norm_`'s return).
    pub grad_norm: Option<f64>,
    /// When the step was queued, in seconds since the Unix epoch (TensorBoard's `wall_time`).
    pub wall_time: f64,
    /// The run's own training metrics
    /// ([`Trainer::train_metric`](crate::fit::Trainer::train_metric)) over this rank's samples
    /// of the step, by name, in the order they were registered (empty without them). Like the
    /// loss, not averaged over ranks: `metrics.jsonl`'s `train_<name>` is the epoch's over all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<(String, f64)>,
}

/// What an epoch needs to number its step records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepLogging {
    /// The epoch, 0-based.
    pub epoch: u64,
    /// Optimizer steps the run took before this epoch's first step (a resumed epoch: before
    /// its first step after the resume).
    pub steps_before: u64,
}

/// A step whose loss (and norm) are still on the device.
struct PendingStep {
    record: StepRecord,
    loss: Tensor,
    norm: Option<Tensor>,
    /// The own metrics' sums over the step's samples (float64, on the device).
    own: Option<Tensor>,
}

/// The steps of an epoch waiting for their values, and those already read.
#[derive(Default)]
pub(crate) struct StepBuffer {
    /// The current accumulation window's loss sum (float64, on the device), sample count and,
    /// with a weighted loss, the sum of the samples' weights (float64, on the device).
    window: Option<(Tensor, u64, Option<Tensor>)>,
    /// The current window's own-metric sums (float64, on the device), with own metrics.
    window_own: Option<Tensor>,
    pending: Vec<PendingStep>,
    ready: Vec<StepRecord>,
}

impl StepBuffer {
    /// Adds a micro-batch's loss sum (float64 device scalar) of `samples` samples to the window,
    /// with the sum of their loss `weight`s for a weighted loss.
    pub(crate) fn add_to_window(
        &mut self,
        loss_sum: &Tensor,
        samples: u64,
        weight: Option<&Tensor>,
    ) {
        let weight = weight.map(Tensor::shallow_clone);
        self.window = Some(match self.window.take() {
            Some((sum, n, w)) => {
                let w = match (w, weight) {
                    (Some(a), Some(b)) => Some(a + b),
                    (a, b) => a.or(b),
                };
                (sum + loss_sum, n + samples, w)
            }
            None => (loss_sum.shallow_clone(), samples, weight),
        });
    }

    /// Adds a micro-batch's own-metric sums (a float64 vector on the device) to the window.
    pub(crate) fn add_own_to_window(&mut self, sums: &Tensor) {
        self.window_own = Some(match self.window_own.take() {
            Some(total) => total + sums,
            None => sums.shallow_clone(),
        });
    }

    /// Closes the window as optimizer step `step`: its mean loss waits on the device.
    pub(crate) fn end_step(
        &mut self,
        step: u64,
        epoch: u64,
        batches_done: usize,
        lr: f64,
        norm: Option<&Tensor>,
    ) {
        let own = self.window_own.take();
        let Some((sum, n, weight)) = self.window.take() else { return };
        let wall_time =
            SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        let record = StepRecord {
            step,
            epoch,
            batches_done,
            loss: f64::NAN,
            lr,
            grad_norm: None,
            wall_time,
            metrics: Vec::new(),
        };
        let norm = norm.map(|t| t.detach().to_kind(Kind::Double));
        let loss = match weight {
            Some(w) => sum / w,
            None => sum / n.max(1) as f64,
        };
        self.pending.push(PendingStep { record, loss, norm, own });
    }

    /// The pending values as float64 device tensors (scalars, and the own metrics' sums as a
    /// vector), in order (to read with the sums).
    pub(crate) fn device_values(&self) -> Vec<Tensor> {
        let mut values = Vec::new();
        for p in &self.pending {
            values.push(p.loss.shallow_clone());
            values.extend(p.norm.as_ref().map(Tensor::shallow_clone));
            values.extend(p.own.as_ref().map(Tensor::shallow_clone));
        }
        values
    }

    /// Fills the pending records from `values` (as [`device_values`](Self::device_values)
    /// ordered them, read from the device, each tensor's elements in turn), with the values of
    /// `metrics` (the own training metrics, whose sums the steps hold) from their sums, and
    /// moves them to the ready ones.
    pub(crate) fn fill(&mut self, values: &[f64], metrics: &[SharedMetric]) {
        let mut at = values.iter().copied();
        for p in self.pending.drain(..) {
            let mut record = p.record;
            record.loss = at.next().unwrap_or(f64::NAN);
            if p.norm.is_some() {
                record.grad_norm = at.next();
            }
            if p.own.is_some() {
                let sums: Vec<f64> = at.by_ref().take(total_len(metrics)).collect();
                let values = values_of(metrics, &sums);
                record.metrics = values.into_iter().map(|v| (v.name, v.value)).collect();
            }
            self.ready.push(record);
        }
    }

    /// The records read so far and not yet taken.
    pub(crate) fn take_ready(&mut self) -> Vec<StepRecord> {
        std::mem::take(&mut self.ready)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_is_one_step_with_the_mean_over_its_samples() {
        let mut b = StepBuffer::default();
        b.add_to_window(&Tensor::from(6.0f64), 4, None); // 4 samples, mean 1.5
        b.add_to_window(&Tensor::from(1.0f64), 2, None); // 2 samples, mean 0.5
        b.end_step(7, 1, 6, 0.1, Some(&Tensor::from(2.5f32)));
        b.add_to_window(&Tensor::from(3.0f64), 3, None);
        b.end_step(8, 1, 7, 0.05, None);
        assert!(b.take_ready().is_empty(), "nothing is ready before a read");
        let values: Vec<f64> = b.device_values().iter().map(|t| t.double_value(&[])).collect();
        assert_eq!(values, [7.0 / 6.0, 2.5, 1.0]);
        b.fill(&values, &[]);
        let ready = b.take_ready();
        assert_eq!(ready.len(), 2);
        assert_eq!((ready[0].step, ready[0].batches_done, ready[0].loss), (7, 6, 7.0 / 6.0));
        assert_eq!((ready[0].grad_norm, ready[1].grad_norm, ready[1].lr), (Some(2.5), None, 0.05));
        assert!(b.take_ready().is_empty() && b.device_values().is_empty());
    }

    #[test]
    fn a_weighted_window_divides_by_its_weights() {
        let mut b = StepBuffer::default();
        b.add_to_window(&Tensor::from(6.0f64), 4, Some(&Tensor::from(3.0f64)));
        b.add_to_window(&Tensor::from(1.0f64), 2, Some(&Tensor::from(1.0f64)));
        b.end_step(1, 0, 2, 0.1, None);
        let values: Vec<f64> = b.device_values().iter().map(|t| t.double_value(&[])).collect();
        assert_eq!(values, [7.0 / 4.0]);
    }
}
