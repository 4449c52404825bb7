//! An epoch's running sums kept on the training device, so that a training step never waits
//! for the device: the loss sum (float64), the correct count (int64) and the task's other sums
//! (float64: top-k, errors, per-label counts) are added to by device kernels and read only when
//! progress is shown, a checkpoint is written or the epoch ends.
//!
//! Every read goes through [`DeviceMetrics::read`], which counts it (as does the one read of
//! GradScaler's inf flag where a step needs it on the host):
//! [`host_reads`](crate::train::host_reads) lets a test check
//! that the loop makes no read per step.
use std::cell::RefCell;

use tch::{Device, Kind, Tensor};

use super::metric_sums::{all_batch_sums, total_len};
use super::step_record::{StepBuffer, StepRecord};
pub(crate) use super::task_sums::TaskSums;
use crate::train::metrics::{RunningMetrics, SharedMetric};
use crate::train::profile::count_host_read;

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
#[path = "device_metrics_tests.rs"]
mod tests;
