//! Named ranges on the profiler's timeline: [`record_function`] (torch's
//! `torch.profiler.record_function`), the names of trainbook's own phases ([`phase`]), and
//! NVTX ranges for Nsight Systems ([`emit_nvtx`], torch's `torch.autograd.profiler.emit_nvtx`).
use std::ffi::CString;
use std::marker::PhantomData;

use crate::shim::profiler as raw;
use crate::shim::take_message;
use crate::{Error, Result};

/// The names of the ranges trainbook's training loop opens around its phases (in every trace,
/// under each `ProfilerStep#N`). Under DDP the gradient all-reduce runs inside the backward
/// pass, where c10d records its own ranges (`gloo:all_reduce` on Gloo), or after a CUDA
/// graph's replay in a range of its own.
pub mod phase {
    /// Waiting for the data loader to hand over the next batch.
    pub const DATA_WAIT: &str = "trainbook::data_wait";
    /// The forward pass and the loss (under the run's autocast).
    pub const FORWARD: &str = "trainbook::forward";
    /// The backward pass (with DDP's bucketed gradient all-reduce inside it).
    pub const BACKWARD: &str = "trainbook::backward";
    /// Forward, loss and backward as one replay of the captured CUDA graph.
    pub const GRAPH_REPLAY: &str = "trainbook::graph_replay";
    /// Under DDP, the gradients' all-reduce after a replay of the captured CUDA graph (in an
    /// eager step it runs inside the backward pass).
    pub const ALL_REDUCE: &str = "trainbook::all_reduce";
    /// Gradient clipping, the optimizer step and GradScaler's update.
    pub const OPTIMIZER_STEP: &str = "trainbook::optimizer_step";
    /// A checkpoint's part on the training thread: every rank's generator states gathered,
    /// the weights and optimizer state copied to host memory (the files are written in the
    /// background).
    pub const CHECKPOINT_COPY: &str = "trainbook::checkpoint_copy";
    /// One batch of a validation or test pass.
    pub const EVAL_STEP: &str = "trainbook::eval_step";
}

/// An open range on this thread's profiler timeline; it ends when dropped (on the thread that
/// opened it). Nothing is recorded when no profiler is on.
#[must_use = "the range ends when this guard is dropped"]
pub struct RecordFunction {
    raw: *mut raw::TbRecordFunction,
    // Ends on the thread that opened it: libtorch's RecordFunction is the thread's.
    _not_send: PhantomData<*mut ()>,
}

/// Opens a range named `name` (torch's `with torch.profiler.record_function(name):`), which
/// a recording [`Profiler`](super::Profiler) shows with the operators run inside it.
///
/// ```
/// let _range = trainbook::train::record_function("my_phase")?;
/// let _y = tch::Tensor::ones([2], (tch::Kind::Float, tch::Device::Cpu)) * 2;
/// # Ok::<(), trainbook::Error>(())
/// ```
pub fn record_function(name: &str) -> Result<RecordFunction> {
    let c_name = CString::new(name).map_err(|_| {
        Error::InvalidArgument(format!("a profiler range name contains a NUL byte: {name:?}"))
    })?;
    let mut out = std::ptr::null_mut();
    // SAFETY: `c_name` outlives the call; the shim writes one handle to `out`.
    let err = unsafe { raw::tb_record_function_begin(c_name.as_ptr(), &mut out) };
    if let Some(message) = take_message(err) {
        return Err(Error::Kernel { op: format!("record_function({name:?})"), message });
    }
    Ok(RecordFunction { raw: out, _not_send: PhantomData })
}

impl Drop for RecordFunction {
    fn drop(&mut self) {
        // SAFETY: `raw` came from tb_record_function_begin and is ended once, on its thread.
        unsafe { raw::tb_record_function_end(self.raw) }
    }
}

/// A phase's range (one of [`phase`]'s names) when a profiler, or NVTX, records on this
/// thread; else nothing is opened, so a run without a profiler makes one cheap check per phase.
pub(crate) fn phase_range(name: &'static str) -> Option<RecordFunction> {
    // The names are constants without NUL bytes: opening one fails only if allocation does.
    super::is_profiler_enabled().then(|| record_function(name).ok()).flatten()
}

/// NVTX ranges on while alive (torch's `with torch.autograd.profiler.emit_nvtx():`): every
/// operator, and every [`record_function`] range, becomes an NVTX range that Nsight Systems
/// (`nsys profile`) shows on its timeline. Ends when dropped.
#[must_use = "NVTX ranges stop when this guard is dropped"]
pub struct NvtxRanges {
    _not_send: PhantomData<*mut ()>,
}

/// Turns NVTX ranges on for this thread. An error
/// ([`Error::Kernel`]) in a build without CUDA, or when a profiler is already recording here.
pub fn emit_nvtx() -> Result<NvtxRanges> {
    // SAFETY: no arguments; the shim checks the thread's profiler state.
    let err = unsafe { raw::tb_profiler_nvtx_enable() };
    if let Some(message) = take_message(err) {
        return Err(Error::Kernel { op: "emit_nvtx".into(), message });
    }
    Ok(NvtxRanges { _not_send: PhantomData })
}

impl Drop for NvtxRanges {
    fn drop(&mut self) {
        // SAFETY: the guard exists only after a successful enable on this thread.
        drop(take_message(unsafe { raw::tb_profiler_nvtx_disable() }));
    }
}
