//! An epoch's running sums kept on the training device, so that a training step never waits
//! for the device: the loss sum (float64), the correct count (int64) and the task's other sums
//! (float64: top-k, errors, per-label counts) are added to by device kernels and read only when
//! progress is shown, a checkpoint is written or the epoch ends.
//!
//! Every read goes through [`DeviceMetrics::read`], which counts it (as does the one read of
//! GradScaler's inf flag where a step needs it on the host): [`host_reads`] lets a test check
//! that the loop makes no read per step.
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use tch::{Device, Kind, Tensor};

use super::metric_sums::{all_batch_sums, total_len};
use super::step_record::{StepBuffer, StepRecord};
pub(crate) use super::task_sums::TaskSums;
use crate::train::metrics::{RunningMetrics, SharedMetric};

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

/// Running loss sum and the task's counts on a device, plus the (host-known) sample count.
/// With step records on, it also holds the steps whose losses wait on the device; they are
/// read with the sums (one read for both).
pub struct DeviceMetrics {
    loss_sum: Tensor,
    /// The sum of the samples' loss weights (float64), with a loss that weighs them.
    loss_weight: Option<Tensor>,
    correct: Tensor,
    /// The task's sums beyond the correct count (float64), laid out as [`TaskSums::extra_of`].
    extra: Option<Tensor>,
    sums: TaskSums,
    count: u64,
    values: u64,
    steps: Option<RefCell<StepBuffer>>,
    /// The run's own training metrics and their running sums (float64, on the device).
    own: Option<(Vec<SharedMetric>, Tensor)>,
}

impl DeviceMetrics {
    /// Classification sums (loss and correct count) that start from `start` (the part of an
    /// epoch done before a resume), on `device`. The loss sum continues from
    /// `start.loss_sum` in the same float64 order of additions as an uninterrupted epoch, so
    /// a resumed epoch reports the identical loss.
    pub fn new(device: Device, start: RunningMetrics) -> DeviceMetrics {
        DeviceMetrics::for_task(device, &start, TaskSums::default())
    }

    /// The sums of `sums.task` (with a top-k count for classification when `sums.top_k` is
    /// set), continuing those of `start`.
    pub(crate) fn for_task(device: Device, start: &RunningMetrics, sums: TaskSums) -> Self {
        let extra = sums
            .extra_of(start)
            .map(|v| Tensor::from_slice(&v).to_kind(Kind::Double).to_device(device));
        DeviceMetrics {
            loss_sum: Tensor::from(start.loss_sum).to_device(device),
            loss_weight: start.loss_weight.map(|w| Tensor::from(w).to_device(device)),
            correct: Tensor::from(start.correct as i64).to_device(device),
            extra,
            sums,
            count: start.count,
            values: start.values,
            steps: None,
            own: None,
        }
    }

    /// Also sums `metrics` (the run's own training metrics) over the batches, continuing
    /// `start.own_sums` (a resumed epoch's first part, all ranks), or from zero where `start`
    /// has no samples. Sums of another length than `metrics` keep, from an epoch that has
    /// samples (a checkpoint written with other training metrics), are an error saying so.
    pub(crate) fn with_own_metrics(
        mut self,
        metrics: &[SharedMetric],
        start: &RunningMetrics,
        device: Device,
    ) -> crate::Result<DeviceMetrics> {
        if metrics.is_empty() {
            return Ok(self);
        }
        let len = total_len(metrics);
        let sums = if start.own_sums.len() == len {
            Tensor::from_slice(&start.own_sums).to_device(device)
        } else if start.own_sums.is_empty() && start.count == 0 {
            Tensor::zeros([len as i64], (Kind::Double, device))
        } else {
            let names: Vec<&str> = metrics.iter().map(|m| m.name()).collect();
            return Err(crate::Error::InvalidArgument(format!(
                "the epoch being resumed holds {} sums of training metrics, but this run's \
                 training metrics ({}) keep {len}: resume with the Trainer::train_metric list \
                 the checkpoint was written with, or from a checkpoint at an epoch's end",
                start.own_sums.len(),
                names.join(", ")
            )));
        };
        self.own = Some((metrics.to_vec(), sums));
        Ok(self)
    }

    /// Adds a training batch's `output` against its `target` to the own training metrics'
    /// sums (and to the step's, with step records), with no read; an error naming a metric
    /// whose sums have another length than it says. Nothing without own metrics.
    pub(crate) fn add_own(&mut self, output: &Tensor, target: &Tensor) -> crate::Result<()> {
        let Some((metrics, sums)) = &mut self.own else { return Ok(()) };
        let batch = all_batch_sums(metrics, output, target)?;
        tch::no_grad(|| drop(sums.g_add_(&batch)));
        if let Some(b) = &self.steps {
            b.borrow_mut().add_own_to_window(&batch);
        }
        Ok(())
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

    /// Adds a batch given its mean loss (a scalar tensor), the model's output and the batch's
    /// target (logits and labels for classification): the loss sum grows by
    /// `mean * batch size` in float64, as the per-sample sum it stands for.
    pub fn add_mean_loss(&mut self, mean_loss: &Tensor, output: &Tensor, target: &Tensor) {
        self.add_mean_loss_weighted(mean_loss, output, target, None);
    }

    /// [`add_mean_loss`](Self::add_mean_loss), and with the samples' loss `weights` (a weighted
    /// mean: [`Loss::sample_weights`](crate::train::Loss::sample_weights)) the loss sum grows by
    /// `mean * sum of the weights` instead, and the weights' sum by theirs.
    pub fn add_mean_loss_weighted(
        &mut self,
        mean_loss: &Tensor,
        output: &Tensor,
        target: &Tensor,
        weights: Option<&Tensor>,
    ) {
        let n = target.size()[0];
        tch::no_grad(|| {
            let mean = mean_loss.detach().to_kind(Kind::Double);
            let weight = weights.map(|w| self.add_weight(w));
            let sum = match &weight {
                Some(w) => mean * w,
                None => mean * n as f64,
            };
            let _ = self.loss_sum.g_add_(&sum);
            if let Some(b) = &self.steps {
                b.borrow_mut().add_to_window(&sum, n as u64, weight.as_ref());
            }
        });
        self.add_outputs(output, target);
    }

    /// Adds a batch given the per-sample loss sum (a float64 scalar tensor).
    pub fn add_loss_sum(&mut self, loss_sum: &Tensor, output: &Tensor, target: &Tensor) {
        self.add_loss_sum_weighted(loss_sum, output, target, None);
    }

    /// [`add_loss_sum`](Self::add_loss_sum), and with a weighted loss the samples' `weights`
    /// added to the weights' sum.
    pub fn add_loss_sum_weighted(
        &mut self,
        loss_sum: &Tensor,
        output: &Tensor,
        target: &Tensor,
        weights: Option<&Tensor>,
    ) {
        tch::no_grad(|| {
            let _ = self.loss_sum.g_add_(&loss_sum.detach().to_kind(Kind::Double));
            if let Some(w) = weights {
                let _sum = self.add_weight(w);
            }
        });
        self.add_outputs(output, target);
    }

    /// Adds the sum of `weights` to the weights' sum; that sum (a float64 device scalar).
    fn add_weight(&mut self, weights: &Tensor) -> Tensor {
        let sum = weights.sum(Kind::Double);
        match &mut self.loss_weight {
            Some(total) => drop(total.g_add_(&sum)),
            total @ None => *total = Some(sum.copy()),
        }
        sum
    }

    fn add_outputs(&mut self, output: &Tensor, target: &Tensor) {
        let batch = self.sums.of_batch(output, target);
        tch::no_grad(|| {
            if let Some(c) = &batch.correct {
                let _ = self.correct.g_add_(c);
            }
            match (&mut self.extra, batch.extra) {
                (Some(e), Some(b)) => drop(e.g_add_(&b)),
                (e @ None, Some(b)) => *e = Some(b),
                _ => {}
            }
        });
        self.count += target.size()[0] as u64;
        self.values += batch.values;
    }

    /// Samples added so far (known on the host, no device read).
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The sums as host values: one (counted) read from the device, one copy. With step
    /// records on, the pending steps' losses come back in the same copy.
    pub fn read(&self) -> RunningMetrics {
        count_host_read();
        // Every value as float64 in one tensor (the counts stay exact below 2^53).
        let scalar = |t: &Tensor| t.to_kind(Kind::Double).view([1]);
        let mut values = vec![scalar(&self.loss_sum), scalar(&self.correct)];
        values.extend(self.loss_weight.as_ref().map(scalar));
        let at = values.len();
        let extra_len = self.extra.as_ref().map_or(0, |e| e.numel());
        values.extend(self.extra.as_ref().map(|e| e.view([-1])));
        let own_len = self.own.as_ref().map_or(0, |(_, sums)| sums.numel());
        values.extend(self.own.as_ref().map(|(_, sums)| sums.view([-1])));
        let mut buffer = self.steps.as_ref().map(|b| b.borrow_mut());
        if let Some(b) = &buffer {
            values.extend(b.device_values().iter().map(|t| t.to_kind(Kind::Double).view([-1])));
        }
        let host = Vec::<f64>::try_from(Tensor::cat(&values, 0).to_device(Device::Cpu))
            .unwrap_or_default();
        let mut m = RunningMetrics {
            loss_sum: host.first().copied().unwrap_or(f64::NAN),
            correct: host.get(1).copied().unwrap_or(0.0) as u64,
            loss_weight: self.loss_weight.as_ref().and(host.get(2).copied()),
            count: self.count,
            values: self.values,
            ..Default::default()
        };
        let extra_end = at + extra_len;
        if extra_len > 0 {
            self.sums.fill(&mut m, host.get(at..extra_end).unwrap_or_default());
        }
        let own_end = extra_end + own_len;
        m.own_sums = host.get(extra_end..own_end).unwrap_or_default().to_vec();
        if let Some(b) = &mut buffer {
            let metrics = self.own.as_ref().map_or(&[][..], |(m, _)| m.as_slice());
            b.fill(host.get(own_end..).unwrap_or_default(), metrics);
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests that read the device take turns: two of them count the reads.
    static READS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn turn() -> std::sync::MutexGuard<'static, ()> {
        READS.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    #[test]
    fn sums_match_the_host_metrics_and_reads_are_counted() {
        let _turn = turn();
        let logits = Tensor::from_slice(&[1.0f32, 0.0, 0.0, 1.0, 2.0, 0.0]).view([3, 2]);
        let labels = Tensor::from_slice(&[0i64, 0, 0]);
        let mean = Tensor::from(0.7f32);
        let start = RunningMetrics { loss_sum: 1.25, correct: 4, count: 5, ..Default::default() };
        let mut host = start.clone();
        host.add_batch(f64::from(0.7f32) * 3.0, &logits, &labels);
        let mut dev = DeviceMetrics::new(Device::Cpu, start.clone());
        dev.add_mean_loss(&mean, &logits, &labels);
        let before = host_reads();
        assert_eq!(dev.read(), host);
        assert_eq!(host_reads(), before + 1);
    }

    #[test]
    fn weighted_sums_continue_a_resumed_epochs_weights() {
        let _turn = turn();
        let logits = Tensor::from_slice(&[1.0f32, 0.0, 0.0, 1.0]).view([2, 2]);
        let labels = Tensor::from_slice(&[0i64, 1]);
        let weights = Tensor::from_slice(&[0.5f64, 2.0]);
        let start = RunningMetrics {
            loss_sum: 1.25,
            loss_weight: Some(3.0),
            count: 5,
            ..Default::default()
        };
        let mut dev = DeviceMetrics::new(Device::Cpu, start).with_step_records();
        dev.add_mean_loss_weighted(&Tensor::from(0.75f32), &logits, &labels, Some(&weights));
        dev.end_step(1, 0, 1, 0.1, None);
        dev.add_loss_sum_weighted(&Tensor::from(1.0f64), &logits, &labels, Some(&weights));
        let m = dev.read();
        assert_eq!((m.loss_sum, m.loss_weight, m.count), (1.25 + 0.75 * 2.5 + 1.0, Some(8.0), 9));
        assert_eq!(m.loss(), (1.25 + 0.75 * 2.5 + 1.0) / 8.0);
        assert_eq!(dev.take_steps()[0].loss, 0.75, "the step's weighted mean");
        // Without weights nothing of them is kept.
        let plain = DeviceMetrics::new(Device::Cpu, RunningMetrics::default());
        assert_eq!(plain.read().loss_weight, None);
    }

    #[test]
    fn step_records_come_back_with_the_sums_in_the_same_read() {
        let _turn = turn();
        let logits = Tensor::from_slice(&[1.0f32, 0.0, 0.0, 1.0]).view([2, 2]);
        let labels = Tensor::from_slice(&[0i64, 0]);
        let start = RunningMetrics { loss_sum: 1.25, correct: 4, count: 5, ..Default::default() };
        let mut plain = DeviceMetrics::new(Device::Cpu, start.clone());
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

    /// A metric of one's own for these tests: the sum of the first logit, and the count.
    struct FirstLogit;

    impl crate::train::Metric for FirstLogit {
        fn name(&self) -> &str {
            "first"
        }
        fn mode(&self) -> crate::train::Mode {
            crate::train::Mode::Max
        }
        fn sums_len(&self) -> usize {
            2
        }
        fn batch_sums(&self, output: &Tensor, target: &Tensor) -> Tensor {
            let n = Tensor::from(target.size()[0] as f64);
            Tensor::stack(&[output.select(1, 0).sum(Kind::Double), n], 0)
        }
        fn compute(&self, sums: &[f64]) -> f64 {
            sums[0] / sums[1]
        }
    }

    #[test]
    fn own_training_metrics_continue_their_sums_and_give_each_step_its_value() {
        let _turn = turn();
        let metrics: Vec<SharedMetric> = vec![std::sync::Arc::new(FirstLogit)];
        let logits = Tensor::from_slice(&[1.0f32, 0.0, 3.0, 1.0]).view([2, 2]);
        let labels = Tensor::from_slice(&[0i64, 1]);
        let start = RunningMetrics { count: 5, own_sums: vec![2.5, 5.0], ..Default::default() };
        let mut dev = DeviceMetrics::new(Device::Cpu, start.clone()).with_step_records();
        dev = dev.with_own_metrics(&metrics, &start, Device::Cpu).unwrap();
        for (i, mean) in [0.75f32, 0.5].into_iter().enumerate() {
            dev.add_mean_loss(&Tensor::from(mean), &logits, &labels);
            dev.add_own(&logits, &labels).unwrap();
            dev.end_step(1 + i as u64, 0, i + 1, 0.1, None);
        }
        let before = host_reads();
        let m = dev.read();
        assert_eq!(host_reads(), before + 1, "the own sums come in the same read");
        assert_eq!((m.own_sums, m.count), (vec![2.5 + 4.0 + 4.0, 5.0 + 2.0 + 2.0], 9));
        let steps = dev.take_steps();
        assert_eq!(steps.len(), 2);
        for s in &steps {
            assert_eq!(s.metrics, [("first".to_string(), 2.0)], "this step's samples only");
        }
        // An epoch with samples but other sums (a checkpoint written with other metrics) is an
        // error; one without samples starts from zero.
        let other = RunningMetrics { count: 5, own_sums: vec![1.0], ..Default::default() };
        let dev = DeviceMetrics::new(Device::Cpu, other.clone());
        let err = dev.with_own_metrics(&metrics, &other, Device::Cpu).err().unwrap();
        assert!(err.to_string().contains("holds 1 sums of training metrics"), "{err}");
        let fresh = DeviceMetrics::new(Device::Cpu, RunningMetrics::default());
        let fresh = fresh.with_own_metrics(&metrics, &RunningMetrics::default(), Device::Cpu);
        assert_eq!(fresh.unwrap().read().own_sums, [0.0, 0.0]);
    }

    #[test]
    fn the_training_loop_reads_the_device_only_through_device_metrics() {
        // A read hidden elsewhere in the loop would escape the count that tests rely on.
        for (name, source) in [("epoch/mod.rs", include_str!("mod.rs"))] {
            for token in ["double_value", "int64_value", "f64_value", "Vec::try_from", ".item("] {
                assert!(
                    !source.contains(token),
                    "{name} reads the device with {token}; go through DeviceMetrics::read"
                );
            }
        }
    }
}
