//! A profiler over libtorch's own (Kineto, what `torch.profiler.profile` drives): the
//! operators, and on CUDA the kernels and copies, of the steps a [`ProfileSchedule`] selects,
//! saved as a Chrome trace (what torch's `export_chrome_trace` writes) under torch's file-name
//! scheme (`WORKER.TIME_NS.pt.trace.json`). The schedule is
//! in `schedule.rs`, the named ranges (trainbook's phases, your own, NVTX) in `range.rs`, and the
//! count of the loop's reads from the device in `host_reads.rs`.
mod host_reads;
mod range;
mod schedule;

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) use host_reads::count_host_read;
pub use host_reads::host_reads;
pub(crate) use range::phase_range;
pub use range::{emit_nvtx, phase, record_function, NvtxRanges, RecordFunction};
pub use schedule::{ProfileSchedule, ProfilerAction};

use crate::shim::profiler as raw;
use crate::shim::take_message;
use crate::{Error, Result};

/// Records the steps its [`ProfileSchedule`] selects (torch's
/// `torch.profiler.profile(schedule=..., on_trace_ready=tensorboard_trace_handler(dir))`):
/// call [`Profiler::step`] after every training step, as `prof.step()`; each cycle's trace is
/// written to `dir` when its last active step ends (or at [`Profiler::stop`]). Each step is a
/// `ProfilerStep#N` range on the timeline. The profiler is enabled for the calling thread (as
/// torch's is).
///
/// ```no_run
/// use trainbook::train::{Profiler, ProfileSchedule};
/// let mut prof = Profiler::new("out/profile", ProfileSchedule::new(1, 1, 3)?)?;
/// prof.start()?;
/// for _ in 0..6 {
///     // ... one training step ...
///     prof.step()?;
/// }
/// let traces = prof.stop()?; // one file: steps 2-4
/// # Ok::<(), trainbook::Error>(())
/// ```
pub struct Profiler {
    dir: PathBuf,
    schedule: ProfileSchedule,
    config: raw::TbProfileConfig,
    worker: String,
    step_num: usize,
    action: Option<ProfilerAction>,
    step_range: Option<RecordFunction>,
    traces: Vec<PathBuf>,
}

impl Profiler {
    /// A profiler writing its traces to `dir` (created when the first trace is saved), CPU
    /// activity only, named after this host and process as torch names a worker
    /// (`HOST_PID`). Not started: see [`Profiler::start`].
    pub fn new(dir: impl AsRef<Path>, schedule: ProfileSchedule) -> Result<Self> {
        let host = hostname();
        Ok(Profiler {
            dir: dir.as_ref().to_path_buf(),
            schedule: schedule.validated()?,
            config: raw::TbProfileConfig {
                cuda: 0,
                record_shapes: 0,
                profile_memory: 0,
                with_flops: 0,
            },
            worker: format!("{host}_{}", std::process::id()),
            step_num: 0,
            action: None,
            step_range: None,
            traces: Vec::new(),
        })
    }

    /// Also records CUDA kernels and memory copies (torch's `ProfilerActivity.CUDA`, through
    /// CUPTI); for a run on a GPU.
    pub fn cuda(mut self, on: bool) -> Self {
        self.config.cuda = on.into();
        self
    }

    /// Records operators' input shapes (torch's `record_shapes`).
    pub fn record_shapes(mut self, on: bool) -> Self {
        self.config.record_shapes = on.into();
        self
    }

    /// Records tensor allocations and frees (torch's `profile_memory`).
    pub fn profile_memory(mut self, on: bool) -> Self {
        self.config.profile_memory = on.into();
        self
    }

    /// Estimates the FLOPs of matrix multiplications and convolutions (torch's `with_flops`).
    pub fn with_flops(mut self, on: bool) -> Self {
        self.config.with_flops = on.into();
        self
    }

    /// The worker name the trace files start with (torch's `tensorboard_trace_handler`
    /// `worker_name`; `fit` uses `rank0`, `rank1`, ...).
    pub fn worker_name(mut self, name: impl Into<String>) -> Self {
        self.worker = name.into();
        self
    }

    /// The steps this profiler records.
    pub fn schedule(&self) -> ProfileSchedule {
        self.schedule
    }

    /// Whether the current step is recorded (a warm-up or active step).
    pub fn is_recording(&self) -> bool {
        matches!(self.action, Some(ProfilerAction::Record | ProfilerAction::RecordAndSave))
    }

    /// Whether [`Profiler::start`] has run and [`Profiler::stop`] not yet.
    pub fn is_started(&self) -> bool {
        self.action.is_some()
    }

    /// The trace files saved so far.
    pub fn traces(&self) -> &[PathBuf] {
        &self.traces
    }

    /// Starts step 0 (torch's `prof.start()`, or entering `with profile(...)`). An error when
    /// started already.
    pub fn start(&mut self) -> Result<()> {
        if self.action.is_some() {
            return Err(Error::InvalidArgument("Profiler::start: already started".into()));
        }
        let first = self.schedule.action(0);
        self.transit(ProfilerAction::None, Some(first))?;
        self.action = Some(first);
        self.step_range = Some(record_function(&format!("ProfilerStep#{}", self.step_num))?);
        Ok(())
    }

    /// Ends the current step and starts the next (torch's `prof.step()`): set up, start,
    /// stop and save as the schedule says. An error when not started.
    pub fn step(&mut self) -> Result<()> {
        let Some(previous) = self.action else {
            return Err(Error::InvalidArgument("Profiler::step before Profiler::start".into()));
        };
        drop(self.step_range.take());
        self.step_num += 1;
        let next = self.schedule.action(self.step_num);
        self.action = Some(next);
        self.transit(previous, Some(next))?;
        self.step_range = Some(record_function(&format!("ProfilerStep#{}", self.step_num))?);
        Ok(())
    }

    /// Stops (torch's `prof.stop()`): a cycle cut short is saved as it stands, a warm-up
    /// discarded. Returns every trace file saved. Stopping a stopped profiler does nothing.
    pub fn stop(&mut self) -> Result<Vec<PathBuf>> {
        drop(self.step_range.take());
        if let Some(previous) = self.action.take() {
            self.transit(previous, None)?;
        }
        Ok(self.traces.clone())
    }

    /// torch's `_transit_action` table: what changing from `previous` to `next` (None: the
    /// end) does to Kineto.
    fn transit(&mut self, previous: ProfilerAction, next: Option<ProfilerAction>) -> Result<()> {
        use ProfilerAction::*;
        let recording = |a: ProfilerAction| matches!(a, Record | RecordAndSave);
        match (previous, next) {
            (None, Some(None))
            | (Warmup, Some(Warmup))
            | (Record, Some(Record | RecordAndSave)) => {}
            (None, Option::None) => {}
            (None, Some(Warmup)) => self.prepare()?,
            (None, Some(n)) if recording(n) => {
                self.prepare()?;
                self.enable()?;
            }
            (Warmup, Some(n)) if recording(n) => self.enable()?,
            // A warm-up that ends without recording: set up, started and stopped, discarded.
            (Warmup, _) => {
                self.enable()?;
                self.disable(false)?;
            }
            // A cycle ended early by the schedule: stopped, not saved (torch warns).
            (Record, Some(None | Warmup)) => self.disable(false)?,
            (Record | RecordAndSave, Option::None) => self.disable(true)?,
            (RecordAndSave, Some(n)) => {
                self.disable(true)?;
                if n != None {
                    self.prepare()?;
                }
                if recording(n) {
                    self.enable()?;
                }
            }
            _ => unreachable!("every (previous, next) pair is matched above"),
        }
        Ok(())
    }

    fn prepare(&self) -> Result<()> {
        // SAFETY: `config` is a plain C struct owned by self.
        kineto("prepare the profiler", unsafe { raw::tb_profiler_prepare(&self.config) })
    }

    fn enable(&self) -> Result<()> {
        // SAFETY: as above.
        kineto("start the profiler", unsafe { raw::tb_profiler_enable(&self.config) })
    }

    /// Stops recording; with `save`, writes the trace (`dir/WORKER.TIME_NS.pt.trace.json`).
    fn disable(&mut self, save: bool) -> Result<()> {
        if !save {
            // SAFETY: a NULL path discards the result.
            return kineto("stop the profiler", unsafe {
                raw::tb_profiler_disable(std::ptr::null())
            });
        }
        if let Err(source) = std::fs::create_dir_all(&self.dir) {
            // Stopped all the same (a profiler left on would record the rest of the run).
            // SAFETY: a NULL path discards the result.
            drop(take_message(unsafe { raw::tb_profiler_disable(std::ptr::null()) }));
            return Err(Error::Io { path: self.dir.clone(), source });
        }
        let ns = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let path = self.dir.join(format!("{}.{ns}.pt.trace.json", self.worker));
        let c_path = CString::new(path.to_string_lossy().as_bytes()).map_err(|_| {
            Error::InvalidArgument(format!("{}: a trace path with a NUL byte", path.display()))
        })?;
        // SAFETY: `c_path` outlives the call.
        kineto("stop the profiler and save its trace", unsafe {
            raw::tb_profiler_disable(c_path.as_ptr())
        })?;
        if !path.is_file() {
            return Err(Error::Io {
                path,
                source: std::io::Error::other("the profiler wrote no trace file here"),
            });
        }
        self.traces.push(path);
        Ok(())
    }
}

impl Drop for Profiler {
    /// Stops a profiler still running (saving a cycle cut short, as torch's `__exit__` does);
    /// an error here cannot be returned, so it is printed.
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            eprintln!("trainbook profiler: {e}");
        }
    }
}

fn kineto(op: &str, err: *mut std::os::raw::c_char) -> Result<()> {
    take_message(err).map_or(Ok(()), |message| Err(Error::Kernel { op: op.into(), message }))
}

/// Whether a profiler records on this thread now (torch's `_is_profiler_enabled`).
pub fn is_profiler_enabled() -> bool {
    // SAFETY: reads the thread's profiler state.
    unsafe { raw::tb_profiler_enabled() != 0 }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}
