//! The sums of an evaluation's own metrics ([`Metric`]s) kept on the device: every batch adds
//! its vector by a device kernel, the epoch's end reads them all in one copy, sums them over
//! the ranks and computes each metric's value.
use tch::{Device, Kind, Tensor};

use crate::train::metrics::{Metric, MetricValue, SharedMetric};
use crate::train::profile::count_host_read;
use crate::train::Strategy;
use crate::{Error, Result};

/// `metric`'s sums of a batch as a float64 vector (no gradients, no read); a vector of another
/// length than [`Metric::sums_len`] says is an error naming the metric.
fn checked_batch_sums(metric: &dyn Metric, output: &Tensor, target: &Tensor) -> Result<Tensor> {
    let batch = tch::no_grad(|| metric.batch_sums(&output.detach(), target).to_kind(Kind::Double));
    if batch.numel() != metric.sums_len() {
        return Err(Error::InvalidArgument(format!(
            "metric {:?}: batch_sums gave {} values, sums_len says {}",
            metric.name(),
            batch.numel(),
            metric.sums_len()
        )));
    }
    Ok(batch.view([-1]))
}

/// Every metric's sums of a batch, one after the other in one float64 vector (what a training
/// epoch adds for its own metrics).
pub(crate) fn all_batch_sums(
    metrics: &[SharedMetric],
    output: &Tensor,
    target: &Tensor,
) -> Result<Tensor> {
    let parts = metrics
        .iter()
        .map(|m| checked_batch_sums(m.as_ref(), output, target))
        .collect::<Result<Vec<_>>>()?;
    Ok(Tensor::cat(&parts, 0))
}

/// Each metric's value from `sums` laid out as [`all_batch_sums`] lays them out (over
/// however many samples and ranks they were summed).
pub(crate) fn values_of(metrics: &[SharedMetric], sums: &[f64]) -> Vec<MetricValue> {
    let mut at = sums.iter().copied();
    metrics
        .iter()
        .map(|m| MetricValue::of(m.as_ref(), at.by_ref().take(m.sums_len()).collect()))
        .collect()
}

/// How many sums `metrics` keep together.
pub(crate) fn total_len(metrics: &[SharedMetric]) -> usize {
    metrics.iter().map(|m| m.sums_len()).sum()
}

/// One running sum vector per metric (`None` until its first batch).
pub(crate) struct MetricSums<'a> {
    metrics: &'a [SharedMetric],
    sums: Vec<Option<Tensor>>,
}

impl<'a> MetricSums<'a> {
    /// No sums yet for `metrics`.
    pub fn new(metrics: &'a [SharedMetric]) -> MetricSums<'a> {
        MetricSums { metrics, sums: metrics.iter().map(|_| None).collect() }
    }

    /// Adds a batch of `output`s against `target`s to every metric's sums (no gradients, no
    /// read); a metric whose vector has another length than it says is an error naming it.
    pub fn add(&mut self, output: &Tensor, target: &Tensor) -> Result<()> {
        for (m, sum) in self.metrics.iter().zip(&mut self.sums) {
            let batch = checked_batch_sums(m.as_ref(), output, target)?;
            match sum {
                Some(s) => drop(tch::no_grad(|| s.g_add_(&batch))),
                None => *sum = Some(batch),
            }
        }
        Ok(())
    }

    /// Every metric's value over all ranks' samples: one read of all the sums, one sum over
    /// the ranks (every rank calls this, in the same order).
    pub fn finish(self, strategy: &dyn Strategy) -> Result<Vec<MetricValue>> {
        if self.metrics.is_empty() {
            return Ok(Vec::new());
        }
        let parts: Vec<Tensor> = self
            .metrics
            .iter()
            .zip(self.sums)
            .map(|(m, s)| {
                let zeros = || Tensor::zeros([m.sums_len() as i64], (Kind::Double, Device::Cpu));
                s.map_or_else(zeros, |s| s.to_device(Device::Cpu))
            })
            .collect();
        count_host_read();
        let local = Vec::<f64>::try_from(Tensor::cat(&parts, 0))?;
        Ok(values_of(self.metrics, &strategy.sum_f64s(local)?))
    }
}
