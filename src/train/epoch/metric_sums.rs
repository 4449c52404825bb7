//! The sums of an evaluation's own metrics ([`Metric`]s) kept on the device: every batch adds
//! its vector by a device kernel, the epoch's end reads them all in one copy, sums them over
//! the ranks and computes each metric's value.
use tch::{Device, Kind, Tensor};

use super::device_metrics::count_host_read;
use crate::train::metrics::{Metric, MetricValue, SharedMetric};
use crate::train::Strategy;
use crate::{Error, Result};

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
            let batch = tch::no_grad(|| m.batch_sums(output, target).to_kind(Kind::Double));
            if batch.numel() != m.sums_len() {
                return Err(Error::InvalidArgument(format!(
                    "metric {:?}: batch_sums gave {} values, sums_len says {}",
                    m.name(),
                    batch.numel(),
                    m.sums_len()
                )));
            }
            let batch = batch.view([-1]);
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
        let mut all = strategy.sum_f64s(local)?.into_iter();
        Ok(self
            .metrics
            .iter()
            .map(|m| {
                MetricValue::of(
                    m.as_ref() as &dyn Metric,
                    all.by_ref().take(m.sums_len()).collect(),
                )
            })
            .collect())
    }
}
