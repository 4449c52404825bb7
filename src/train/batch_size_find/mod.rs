//! The batch-size finder (Lightning's `Tuner.scale_batch_size`, Accelerate's
//! `find_executable_batch_size`): train a few steps at a batch size, double it while the steps
//! fit in memory, and back off to the largest that fitted (`Power`), or search between that and
//! the first that did not (`BinSearch`). A batch "does not fit" when a step runs out of memory
//! (CUDA's or the CPU allocator's error, caught), or when the trial's peak memory is above a
//! limit one sets: on a GPU the caching allocator's peak reserved bytes
//! (`torch.cuda.max_memory_reserved`), on the CPU the process's peak resident set (`VmHWM`, what
//! a Slurm `--mem` limit or the kernel's OOM killer counts). On the CPU the limit is
//! required: there, running out of memory usually ends the process (the kernel's OOM killer)
//! rather than failing an allocation.
//!
//! Lightning's search, kept: trials start at `init_val` (2), run `steps_per_trial` (3) optimizer
//! steps each, stop after `max_trials` (25) or once a batch holds the whole data set; an
//! out-of-memory error is one whose message has "CUDA" and "out of memory", cuDNN's
//! `CUDNN_STATUS_NOT_SUPPORTED`, or "DefaultCPUAllocator: can't allocate memory"
//! (`lightning.pytorch.utilities.memory.is_oom_error`). Two differences, both to return only a
//! size that ran: Lightning's `power` mode returns a doubled size it never tried when the trials
//! run out, and its `binsearch` returns 1 untried when 2 fails; here the answer is always the
//! largest size whose trial fitted, and no fitting size is an error. The finder runs on one
//! process, as Lightning's (a rank out of memory mid-step would leave its peers waiting in the
//! gradient all-reduce); the size it finds is a per-GPU batch.
mod memory;
mod trial;

pub use trial::{find_batch_size, find_batch_size_step};

/// How the finder moves between trials (Lightning's `mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleMode {
    /// Double until a batch does not fit; the answer is the last that did (`"power"`).
    Power,
    /// Double until a batch does not fit, then halve the gap between the largest that fitted and
    /// the smallest that did not until they are neighbours (`"binsearch"`).
    BinSearch,
}

/// The finder's settings (Lightning's `scale_batch_size` arguments, with its defaults), and a
/// memory limit of one's own.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BatchSizeFindOptions {
    /// Default [`ScaleMode::Power`].
    pub mode: ScaleMode,
    /// Optimizer steps each trial runs (fewer if the data has fewer batches). Default 3.
    pub steps_per_trial: usize,
    /// The first batch size tried. Default 2.
    pub init_val: usize,
    /// Trials at most. Default 25.
    pub max_trials: usize,
    /// A trial whose peak memory is above this many bytes does not fit: the caching
    /// allocator's peak reserved bytes on a GPU, the process's peak resident set on the CPU.
    /// Required on the CPU; default `None`.
    pub max_memory: Option<u64>,
}

impl Default for BatchSizeFindOptions {
    fn default() -> Self {
        BatchSizeFindOptions {
            mode: ScaleMode::Power,
            steps_per_trial: 3,
            init_val: 2,
            max_trials: 25,
            max_memory: None,
        }
    }
}

impl BatchSizeFindOptions {
    fn validate(&self) -> crate::Result<()> {
        let bad = [
            (self.steps_per_trial == 0, "steps_per_trial"),
            (self.init_val == 0, "init_val"),
            (self.max_trials == 0, "max_trials"),
        ];
        match bad.iter().find(|(zero, _)| *zero) {
            Some((_, name)) => Err(crate::Error::InvalidArgument(format!(
                "find_batch_size: {name} is 0 (it must be at least 1)"
            ))),
            None => Ok(()),
        }
    }
}

/// One trial: a batch size, whether it fitted, its peak memory and why it did not fit.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchSizeTrial {
    /// The batch size tried.
    pub batch_size: usize,
    /// Whether its steps ran within memory (and within the limit, if one was set).
    pub fits: bool,
    /// Its peak memory in bytes, when the steps ran (GPU: reserved by the caching allocator;
    /// CPU: the process's resident set).
    pub peak_bytes: Option<u64>,
    /// Why it did not fit: the out-of-memory message, or the peak against the limit.
    pub reason: Option<String>,
}

/// What the finder tried and found.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchSizeFind {
    /// The largest batch size whose trial fitted.
    pub batch_size: usize,
    /// Every trial, in the order run.
    pub trials: Vec<BatchSizeTrial>,
}

/// Whether `message` is an out-of-memory error, as Lightning's `is_oom_error` tells them.
///
/// ```
/// use trainbook::train::is_oom_error;
/// assert!(is_oom_error("CUDA out of memory. Tried to allocate 2.00 GiB"));
/// assert!(is_oom_error("[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory: you tried to allocate 4503599627370496 bytes"));
/// assert!(!is_oom_error("mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"));
/// ```
pub fn is_oom_error(message: &str) -> bool {
    (message.contains("CUDA") && message.contains("out of memory"))
        || message.contains("cuDNN error: CUDNN_STATUS_NOT_SUPPORTED.")
        || message.contains("DefaultCPUAllocator: can't allocate memory")
}

/// The search over sizes: `fits(size)` runs a trial; `dataset_len` ends the doubling once a
/// batch holds every sample.
pub(crate) fn search(
    opts: &BatchSizeFindOptions,
    dataset_len: usize,
    mut try_size: impl FnMut(usize) -> crate::Result<BatchSizeTrial>,
) -> crate::Result<BatchSizeFind> {
    opts.validate()?;
    let mut trials: Vec<BatchSizeTrial> = Vec::new();
    let (mut low, mut high) = (0usize, None::<usize>);
    let mut size = opts.init_val;
    while trials.len() < opts.max_trials {
        let trial = try_size(size)?;
        let fits = trial.fits;
        trials.push(trial);
        if fits {
            low = size;
            if size >= dataset_len {
                break;
            }
        } else {
            high = Some(size);
        }
        let next = match (high, opts.mode) {
            (None, _) => size.saturating_mul(2),
            (Some(_), ScaleMode::Power) if low > 0 => break,
            (Some(h), _) => (low + h) / 2,
        };
        if next == 0 || next <= low || Some(next) == high {
            break;
        }
        size = next;
    }
    if low == 0 {
        let smallest = trials.iter().map(|t| t.batch_size).min().unwrap_or(opts.init_val);
        let why = trials.last().and_then(|t| t.reason.clone()).unwrap_or_default();
        return Err(crate::Error::InvalidArgument(format!(
            "find_batch_size: no batch size fits ({} trials, the smallest {smallest}; {why})",
            trials.len()
        )));
    }
    Ok(BatchSizeFind { batch_size: low, trials })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sizes tried and the answer when every size up to `limit` fits.
    fn run(mode: ScaleMode, init: usize, limit: usize, len: usize) -> (Vec<usize>, usize) {
        let opts = BatchSizeFindOptions { mode, init_val: init, ..Default::default() };
        let found = search(&opts, len, |b| {
            Ok(BatchSizeTrial { batch_size: b, fits: b <= limit, peak_bytes: None, reason: None })
        })
        .unwrap();
        (found.trials.iter().map(|t| t.batch_size).collect(), found.batch_size)
    }

    #[test]
    fn power_doubles_then_backs_off_to_the_last_that_fitted() {
        assert_eq!(run(ScaleMode::Power, 2, 40, 1000), (vec![2, 4, 8, 16, 32, 64], 32));
        // Starting too high: halve until one fits, and do not try the failed size again.
        assert_eq!(run(ScaleMode::Power, 256, 40, 1000), (vec![256, 128, 64, 32], 32));
        // A batch that holds the whole data set ends the doubling.
        assert_eq!(run(ScaleMode::Power, 2, 1 << 20, 100), (vec![2, 4, 8, 16, 32, 64, 128], 128));
    }

    #[test]
    fn binsearch_narrows_to_neighbours_as_lightning_does() {
        // Lightning: ... 32 ok, 64 fails, then (32+64)/2 = 48 fails, 40 ok, 44 fails, 42 fails,
        // 41 fails: 40 and 41 are neighbours.
        let (tried, found) = run(ScaleMode::BinSearch, 2, 40, 1000);
        assert_eq!((tried, found), (vec![2, 4, 8, 16, 32, 64, 48, 40, 44, 42, 41], 40));
        let (tried, found) = run(ScaleMode::BinSearch, 2, 13, 1000);
        assert_eq!((tried, found), (vec![2, 4, 8, 16, 12, 14, 13], 13));
    }

    #[test]
    fn trials_run_out_with_the_largest_that_ran() {
        let opts = BatchSizeFindOptions { max_trials: 3, ..Default::default() };
        let found = search(&opts, 1000, |b| {
            Ok(BatchSizeTrial { batch_size: b, fits: true, peak_bytes: None, reason: None })
        })
        .unwrap();
        assert_eq!(found.batch_size, 8);
        assert_eq!(found.trials.len(), 3);
    }

    #[test]
    fn nothing_fitting_and_zero_settings_are_errors_naming_them() {
        let none = |b| {
            Ok(BatchSizeTrial {
                batch_size: b,
                fits: false,
                peak_bytes: None,
                reason: Some("CUDA out of memory".into()),
            })
        };
        let err = search(&BatchSizeFindOptions::default(), 100, none).unwrap_err().to_string();
        assert!(err.contains("no batch size fits") && err.contains("smallest 1"), "{err}");
        assert!(err.contains("CUDA out of memory"), "{err}");
        let zero = BatchSizeFindOptions { steps_per_trial: 0, ..Default::default() };
        let err = search(&zero, 100, none).unwrap_err().to_string();
        assert!(err.contains("steps_per_trial is 0"), "{err}");
    }
}
