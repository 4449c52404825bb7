//! An epoch's running sums kept on the training device, so that a training step never waits
//! for the device: the loss sum (float64) and the correct count (int64) are added to by device
//! kernels and read only when progress is shown, a checkpoint is written or the epoch ends.
//!
//! Every read goes through [`DeviceMetrics::read`], which counts it (as does the one read of
//! GradScaler's inf flag where a step needs it on the host): [`host_reads`] lets a test check
//! that the loop makes no read per step.
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use tch::{Device, Kind, Tensor};

use super::metrics::RunningMetrics;
use super::step_record::{StepBuffer, StepRecord};

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

/// Counts a read of the device that the training loop makes outside [`DeviceMetrics::read`].
pub(crate) fn count_host_read() {
    HOST_READS.fetch_add(1, Ordering::Relaxed);
}

/// Running loss sum and correct count on a device, plus the (host-known) sample count.
/// With step records on, it also holds the steps whose losses wait on the device; they are
/// read with the sums (one read for both).
pub struct DeviceMetrics {
    loss_sum: Tensor,
    correct: Tensor,
    count: u64,
    steps: Option<RefCell<StepBuffer>>,
}

impl DeviceMetrics {
    /// Sums that start from `start` (the part of an epoch done before a resume), on `device`.
    /// The loss sum continues from `start.loss_sum` in the same float64 order of additions as
    /// an uninterrupted epoch, so a resumed epoch reports the identical loss.
    pub fn new(device: Device, start: RunningMetrics) -> DeviceMetrics {
        DeviceMetrics {
            loss_sum: Tensor::from(start.loss_sum).to_device(device),
            correct: Tensor::from(start.correct as i64).to_device(device),
            count: start.count,
            steps: None,
        }
    }

    /// Also keeps per-step losses for [`StepRecord`]s (read with the sums, at no extra read).
    pub(crate) fn with_step_records(mut self) -> DeviceMetrics {
        self.steps = Some(RefCell::new(StepBuffer::default()));
        self
    }

    /// Ends optimizer step `step` for the step records (no-op without them).
    pub(crate) fn end_step(
        &self,
        step: u64,
        epoch: u64,
        batches_done: usize,
        lr: f64,
        norm: Option<&Tensor>,
    ) {
        if let Some(b) = &self.steps {
            b.borrow_mut().end_step(step, epoch, batches_done, lr, norm);
        }
    }

    /// The step records read from the device so far and not yet taken.
    pub(crate) fn take_steps(&self) -> Vec<StepRecord> {
        self.steps.as_ref().map_or_else(Vec::new, |b| b.borrow_mut().take_ready())
    }

    /// Adds a batch given its mean loss (a scalar tensor), its logits and its labels: the loss
    /// sum grows by `mean * batch size` in float64, as the per-sample sum it stands for.
    pub fn add_mean_loss(&mut self, mean_loss: &Tensor, logits: &Tensor, labels: &Tensor) {
        let n = labels.size()[0];
        tch::no_grad(|| {
            let sum = mean_loss.detach().to_kind(Kind::Double) * n as f64;
            let _ = self.loss_sum.g_add_(&sum);
            if let Some(b) = &self.steps {
                b.borrow_mut().add_to_window(&sum, n as u64);
            }
        });
        self.add_correct(logits, labels);
    }

    /// Adds a batch given the per-sample loss sum (a float64 scalar tensor).
    pub fn add_loss_sum(&mut self, loss_sum: &Tensor, logits: &Tensor, labels: &Tensor) {
        tch::no_grad(|| {
            let _ = self.loss_sum.g_add_(&loss_sum.detach().to_kind(Kind::Double));
        });
        self.add_correct(logits, labels);
    }

    fn add_correct(&mut self, logits: &Tensor, labels: &Tensor) {
        tch::no_grad(|| {
            let right = logits.argmax(1, false).eq_tensor(labels).sum(Kind::Int64);
            let _ = self.correct.g_add_(&right);
        });
        self.count += labels.size()[0] as u64;
    }

    /// Samples added so far (known on the host, no device read).
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The sums as host values: one (counted) read from the device. With step records on,
    /// the pending steps' losses come back in the same copy.
    pub fn read(&self) -> RunningMetrics {
        count_host_read();
        let Some(buffer) = &self.steps else {
            return RunningMetrics {
                loss_sum: self.loss_sum.double_value(&[]),
                correct: self.correct.int64_value(&[]) as u64,
                count: self.count,
            };
        };
        let mut buffer = buffer.borrow_mut();
        // Every value as float64 in one tensor (the count stays exact below 2^53).
        let mut values = vec![self.loss_sum.shallow_clone(), self.correct.to_kind(Kind::Double)];
        values.extend(buffer.device_values());
        let host = Vec::<f64>::try_from(Tensor::stack(&values, 0).to_device(Device::Cpu))
            .unwrap_or_default();
        buffer.fill(host.get(2..).unwrap_or_default());
        RunningMetrics {
            loss_sum: host.first().copied().unwrap_or(f64::NAN),
            correct: host.get(1).copied().unwrap_or(0.0) as u64,
            count: self.count,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_match_the_host_metrics_and_reads_are_counted() {
        let logits = Tensor::from_slice(&[1.0f32, 0.0, 0.0, 1.0, 2.0, 0.0]).view([3, 2]);
        let labels = Tensor::from_slice(&[0i64, 0, 0]);
        let mean = Tensor::from(0.7f32);
        let start = RunningMetrics { loss_sum: 1.25, correct: 4, count: 5 };
        let mut host = start;
        host.add_batch(f64::from(0.7f32) * 3.0, &logits, &labels);
        let mut dev = DeviceMetrics::new(Device::Cpu, start);
        dev.add_mean_loss(&mean, &logits, &labels);
        let before = host_reads();
        assert_eq!(dev.read(), host);
        assert_eq!(host_reads(), before + 1);
    }

    #[test]
    fn step_records_come_back_with_the_sums_in_the_same_read() {
        let logits = Tensor::from_slice(&[1.0f32, 0.0, 0.0, 1.0]).view([2, 2]);
        let labels = Tensor::from_slice(&[0i64, 0]);
        let start = RunningMetrics { loss_sum: 1.25, correct: 4, count: 5 };
        let mut plain = DeviceMetrics::new(Device::Cpu, start);
        let mut dev = DeviceMetrics::new(Device::Cpu, start).with_step_records();
        for (i, mean) in [0.75f32, 0.5].into_iter().enumerate() {
            dev.add_mean_loss(&Tensor::from(mean), &logits, &labels);
            plain.add_mean_loss(&Tensor::from(mean), &logits, &labels);
            dev.end_step(10 + i as u64, 2, i + 1, 0.1, None);
        }
        let before = host_reads();
        assert_eq!(dev.read(), plain.read(), "the sums are the same, bit for bit");
        assert_eq!(host_reads(), before + 2, "one read each");
        let steps = dev.take_steps();
        let losses: Vec<f64> = steps.iter().map(|s| s.loss).collect();
        assert_eq!(losses, [0.75, 0.5]);
        assert_eq!(steps.iter().map(|s| s.step).collect::<Vec<_>>(), [10, 11]);
        assert!(dev.take_steps().is_empty() && plain.take_steps().is_empty());
    }

    #[test]
    fn the_training_loop_reads_the_device_only_through_device_metrics() {
        // A read hidden elsewhere in the loop would escape the count that tests rely on.
        for (name, source) in [("epoch.rs", include_str!("epoch.rs"))] {
            for token in ["double_value", "int64_value", "f64_value", "Vec::try_from", ".item("] {
                assert!(
                    !source.contains(token),
                    "{name} reads the device with {token}; go through DeviceMetrics::read"
                );
            }
        }
    }
}
