//! The safe side of `csrc/cuda_graph_shim.h`: [`CudaGraph`] (one `at::cuda::CUDAGraph` and the
//! side stream it is captured on, freed on drop), autocast's cast cache switch and rebinding
//! parameters' gradients to given tensors.
use std::os::raw::c_int;

use tch::{Device, Tensor};

use crate::shim::check_kernel as check;
use crate::shim::cuda_graph::{
    tb_autocast_cache, tb_cuda_graph_capture_begin, tb_cuda_graph_capture_end,
    tb_cuda_graph_enter_side_stream, tb_cuda_graph_exit_side_stream, tb_cuda_graph_free,
    tb_cuda_graph_new, tb_cuda_graph_replay, tb_set_grads, TbCudaGraph,
};
use crate::shim::tensor_ptrs;
use crate::{Error, Result};

/// A CUDA graph of one device and its side stream (torch's `torch.cuda.CUDAGraph` plus the
/// `torch.cuda.Stream` that `torch.cuda.graph` captures on).
pub(crate) struct CudaGraph {
    raw: *mut TbCudaGraph,
    captured: bool,
}

impl CudaGraph {
    /// An empty graph for `device` (an error on the CPU, or in a build without `cuda`).
    pub(crate) fn new(device: Device) -> Result<CudaGraph> {
        let Device::Cuda(index) = device else {
            return Err(Error::InvalidArgument(format!("a CUDA graph on {device:?}")));
        };
        let index = c_int::try_from(index)
            .map_err(|_| Error::InvalidArgument(format!("CUDA device index {index}")))?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: `raw` receives an owned graph on success, freed in Drop.
        check("create a CUDA graph", unsafe { tb_cuda_graph_new(index, &mut raw) })?;
        Ok(CudaGraph { raw, captured: false })
    }

    /// Runs `body` with the side stream current (it first waits for the current stream's
    /// work, and the current stream waits for the side stream's afterwards).
    pub(crate) fn on_side_stream<T>(&mut self, body: impl FnOnce() -> T) -> Result<T> {
        // SAFETY: `raw` is live until drop.
        check("enter the CUDA graph's side stream", unsafe {
            tb_cuda_graph_enter_side_stream(self.raw)
        })?;
        let out = body();
        // SAFETY: as above; the side stream was entered just before.
        check("leave the CUDA graph's side stream", unsafe {
            tb_cuda_graph_exit_side_stream(self.raw)
        })?;
        Ok(out)
    }

    /// Captures what `body` queues (on the side stream, autocast's cast cache off, as
    /// `torch.cuda.graph` asks) into the graph, which nothing runs yet. An error of `body`
    /// comes back as is after the capture is ended; a capture that CUDA invalidated (an
    /// operation that waits for the device, say) is an error naming the capture.
    pub(crate) fn capture<T>(&mut self, body: impl FnOnce() -> Result<T>) -> Result<T> {
        if self.captured {
            return Err(Error::InvalidArgument("this CUDA graph is captured already".into()));
        }
        let raw = self.raw;
        self.on_side_stream(|| {
            let mut cache = 0;
            // SAFETY: plain calls on the live graph; the out-pointer is valid.
            check("autocast's cast cache", unsafe { tb_autocast_cache(0, &mut cache) })?;
            let begun = check("begin the CUDA graph's capture", unsafe {
                tb_cuda_graph_capture_begin(raw)
            });
            let out = begun.and_then(|()| body());
            // SAFETY: ends what capture_begin started (a no-op error if it did not start).
            let ended = check("capture the training step as a CUDA graph", unsafe {
                tb_cuda_graph_capture_end(raw)
            });
            // SAFETY: a plain call.
            check("autocast's cast cache", unsafe {
                tb_autocast_cache(cache, std::ptr::null_mut())
            })?;
            let out = out?;
            ended.map(|()| out)
        })?
        .inspect(|_| self.captured = true)
    }

    /// Launches the captured graph on the current stream.
    pub(crate) fn replay(&mut self) -> Result<()> {
        if !self.captured {
            return Err(Error::InvalidArgument("a CUDA graph replayed before its capture".into()));
        }
        // SAFETY: `raw` is live and captured.
        check("replay the CUDA graph", unsafe { tb_cuda_graph_replay(self.raw) })
    }
}

impl Drop for CudaGraph {
    fn drop(&mut self) {
        // SAFETY: `raw` came from tb_cuda_graph_new and is freed once.
        unsafe { tb_cuda_graph_free(self.raw) }
    }
}

/// `params[i].grad = grads[i]` for each `i` (shapes checked by the shim).
pub(crate) fn set_grads(params: &[&Tensor], grads: &[&Tensor]) -> Result<()> {
    if params.len() != grads.len() {
        return Err(Error::InvalidArgument(format!(
            "{} gradients for {} parameters",
            grads.len(),
            params.len()
        )));
    }
    let (p, g) = (tensor_ptrs(params), tensor_ptrs(grads));
    // SAFETY: both lists hold live at::Tensor pointers, as many as `p.len()`.
    check("set the parameters' gradients", unsafe { tb_set_grads(p.as_ptr(), g.as_ptr(), p.len()) })
}
