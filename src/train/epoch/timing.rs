//! Where an epoch's time goes: how long the training loop waited for the data loader to hand
//! over the next batch, against the whole epoch. A rank that waits much of the time is
//! starved by its input pipeline (more loader workers, or a faster transform, would help), not
//! by its device. On CUDA, also the caching allocator's memory peaks over the epoch
//! ([`GpuPeaks`]).
use std::time::{Duration, Instant};

use crate::train::profile::{phase, phase_range};

/// An iterator that adds up the time spent inside `next()` (waiting for the loader).
pub(crate) struct Timed<I> {
    inner: I,
    waited: Duration,
}

impl<I: Iterator> Timed<I> {
    pub(crate) fn new(inner: I) -> Timed<I> {
        Timed { inner, waited: Duration::ZERO }
    }
    /// Seconds spent waiting so far.
    pub(crate) fn waited_s(&self) -> f64 {
        self.waited.as_secs_f64()
    }
}

impl<I: Iterator> Iterator for Timed<I> {
    type Item = I::Item;
    fn next(&mut self) -> Option<I::Item> {
        let start = Instant::now();
        let _range = phase_range(phase::DATA_WAIT);
        let item = self.inner.next();
        self.waited += start.elapsed();
        item
    }
}

/// A fraction of waiting above which an epoch line says the loader is the bottleneck.
pub const LOADER_BOUND_FRACTION: f64 = 0.3;

/// The share of `seconds` spent waiting, for each rank's `waited` seconds, as the epoch line
/// shows it: "data wait 4%" (one rank) or "data wait 3-9%" (the range over ranks), with a hint
/// when the worst rank waits more than [`LOADER_BOUND_FRACTION`] of the time.
///
/// ```
/// use trainbook::train::data_wait_note;
/// assert_eq!(data_wait_note(&[0.5], 10.0), "data wait 5%");
/// assert!(data_wait_note(&[1.0, 6.0], 10.0).contains("more loader workers"));
/// ```
pub fn data_wait_note(waited: &[f64], seconds: f64) -> String {
    if waited.is_empty() || seconds <= 0.0 {
        return String::new();
    }
    let pct = |w: f64| 100.0 * w / seconds;
    let lo = waited.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = waited.iter().copied().fold(0.0, f64::max);
    let mut note = if waited.len() == 1 || pct(hi).round() == pct(lo).round() {
        format!("data wait {:.0}%", pct(hi))
    } else {
        format!("data wait {:.0}-{:.0}%", pct(lo), pct(hi))
    };
    if hi / seconds > LOADER_BOUND_FRACTION {
        note.push_str(
            " (waiting for data: try more loader workers, num_workers(n), or lighter transforms)",
        );
    }
    note
}

/// The peaks of CUDA's caching allocator over an epoch (`torch.cuda.reset_peak_memory_stats`
/// at its start, `max_memory_allocated`/`max_memory_reserved` at its end); nothing off CUDA.
pub(crate) struct GpuPeaks(Option<tch::Device>);

impl GpuPeaks {
    pub fn start(device: tch::Device) -> crate::Result<GpuPeaks> {
        if !device.is_cuda() {
            return Ok(GpuPeaks(None));
        }
        crate::cuda::reset_peak_memory_stats(device)?;
        Ok(GpuPeaks(Some(device)))
    }

    /// Every rank's (allocated, reserved) peak in rank order, gathered through `opts`' strategy
    /// (every rank calls it); empty off CUDA.
    pub fn read(&self, opts: &super::EpochOptions) -> crate::Result<Vec<(u64, u64)>> {
        let Some(device) = self.0 else { return Ok(Vec::new()) };
        let (allocated, reserved) = crate::cuda::max_memory(device)?;
        // Bytes below 2^53 are exact in a float64.
        let a = opts.strategy.gather_f64(allocated as f64)?;
        let r = opts.strategy.gather_f64(reserved as f64)?;
        Ok(a.into_iter().zip(r).map(|(a, r)| (a as u64, r as u64)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timed_counts_only_the_time_inside_next() {
        let mut it = Timed::new((0..3).inspect(|_| {
            std::thread::sleep(Duration::from_millis(20));
        }));
        let mut outside = Duration::ZERO;
        for _ in it.by_ref() {
            let t = Instant::now();
            std::thread::sleep(Duration::from_millis(30));
            outside += t.elapsed();
        }
        assert!(
            it.waited_s() >= 0.06 && it.waited_s() < outside.as_secs_f64(),
            "{} s waited",
            it.waited_s()
        );
        assert_eq!(data_wait_note(&[2.0, 4.0], 10.0), "data wait 20-40% (waiting for data: try more loader workers, num_workers(n), or lighter transforms)");
        assert_eq!(data_wait_note(&[], 10.0), "");
    }
}
