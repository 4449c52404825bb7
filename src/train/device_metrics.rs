//! An epoch's running sums kept on the training device, so that a training step never waits
//! for the device: the loss sum (float64) and the correct count (int64) are added to by device
//! kernels and read only when progress is shown, a checkpoint is written or the epoch ends.
//!
//! Every read goes through [`DeviceMetrics::read`], which counts it (as does the one read of
//! GradScaler's inf flag where a step needs it on the host): [`host_reads`] lets a test check
//! that the loop makes no read per step.
use std::sync::atomic::{AtomicU64, Ordering};

use tch::{Device, Kind, Tensor};

use super::metrics::RunningMetrics;

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
pub struct DeviceMetrics {
    loss_sum: Tensor,
    correct: Tensor,
    count: u64,
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
        }
    }

    /// Adds a batch given its mean loss (a scalar tensor), its logits and its labels: the loss
    /// sum grows by `mean * batch size` in float64, as the per-sample sum it stands for.
    pub fn add_mean_loss(&mut self, mean_loss: &Tensor, logits: &Tensor, labels: &Tensor) {
        let n = labels.size()[0];
        tch::no_grad(|| {
            let _ = self.loss_sum.g_add_(&(mean_loss.detach().to_kind(Kind::Double) * n as f64));
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

    /// The sums as host values: one (counted) read from the device.
    pub fn read(&self) -> RunningMetrics {
        count_host_read();
        RunningMetrics {
            loss_sum: self.loss_sum.double_value(&[]),
            correct: self.correct.int64_value(&[]) as u64,
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
