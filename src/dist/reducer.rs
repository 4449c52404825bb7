//! `Reducer`: a safe handle on c10d's `Reducer`, the engine inside torch's
//! `DistributedDataParallel`. It hooks every parameter's gradient accumulator, so that each
//! bucket of gradients is all-reduced as soon as it is complete, while the backward pass goes
//! on; [`Ddp`](crate::train::Ddp) drives it around each step.
use std::ffi::CString;
use std::os::raw::c_int;

use tch::Tensor;

use super::process_group::{tensor_ptrs, ProcessGroup};
use crate::shim::c10d as ffi;
use crate::{Error, Result};

/// How each gradient bucket travels between the ranks (torch's DDP communication hooks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CommHook {
    /// Sum of the gradients divided by the world size, in the gradients' own precision
    /// (torch's default, no hook registered).
    #[default]
    AllReduce,
    /// Buckets cast to float16 for the exchange (`default_hooks.fp16_compress_hook`).
    Fp16Compress,
    /// Buckets cast to bfloat16 for the exchange (`default_hooks.bf16_compress_hook`).
    Bf16Compress,
}

/// Construction settings of a [`Reducer`], with torch DDP's meanings.
pub(crate) struct ReducerConfig {
    pub bucket_bytes: usize,
    pub first_bucket_bytes: usize,
    pub find_unused_parameters: bool,
    pub gradient_as_bucket_view: bool,
    pub static_graph: bool,
    pub comm_hook: CommHook,
}

/// c10d's gradient reducer over a fixed list of parameters.
pub(crate) struct Reducer {
    raw: *mut ffi::TbReducer,
    names: Vec<String>,
    // The parameters in the names' order (the Reducer keeps references of its own).
    params: Vec<Tensor>,
}

impl Reducer {
    /// Hooks `params` (leaves that require grad, in model order) for reduction over `pg`.
    pub fn new(
        pg: &ProcessGroup,
        params: &[(String, Tensor)],
        cfg: &ReducerConfig,
    ) -> Result<Reducer> {
        let tensors: Vec<Tensor> = params.iter().map(|(_, t)| t.shallow_clone()).collect();
        let names: Vec<String> = params.iter().map(|(n, _)| n.clone()).collect();
        let c_names = names
            .iter()
            .map(|n| {
                CString::new(n.as_str()).map_err(|_| {
                    Error::InvalidArgument(format!("parameter name {n:?} contains a NUL byte"))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let name_ptrs: Vec<_> = c_names.iter().map(|c| c.as_ptr()).collect();
        let ptrs = tensor_ptrs(&tensors);
        let hook = match cfg.comm_hook {
            CommHook::AllReduce => ffi::HOOK_ALLREDUCE,
            CommHook::Fp16Compress => ffi::HOOK_FP16,
            CommHook::Bf16Compress => ffi::HOOK_BF16,
        };
        let mut raw = std::ptr::null_mut();
        // SAFETY: all pointers are valid for the call; the Reducer copies what it keeps.
        let err = unsafe {
            ffi::tb_reducer_new(
                pg.raw(),
                ptrs.as_ptr(),
                name_ptrs.as_ptr(),
                ptrs.len(),
                cfg.bucket_bytes as i64,
                cfg.first_bucket_bytes as i64,
                cfg.find_unused_parameters as c_int,
                cfg.gradient_as_bucket_view as c_int,
                cfg.static_graph as c_int,
                hook,
                &mut raw,
            )
        };
        ffi::check("create the DDP reducer", err)?;
        Ok(Reducer { raw, names, params: tensors })
    }

    /// Start of an iteration: `prepare` (a synchronised step) counts the iteration; then the
    /// buckets are rebuilt once, after the first iteration, in the order gradients arrived
    /// (a broadcast from rank 0). Fails when the previous backward left a bucket unreduced.
    pub fn prepare_for_forward(&self, prepare: bool) -> Result<bool> {
        let mut rebuilt: c_int = 0;
        // SAFETY: live handle; `rebuilt` is a valid out-pointer.
        // Rebuilding the buckets waits for rank 0's broadcast.
        let err = crate::rng::blocking(|| unsafe {
            ffi::tb_reducer_prepare_for_forward(self.raw, prepare as c_int, &mut rebuilt)
        });
        ffi::check("DDP forward", err).map_err(|e| self.name_unused(e))?;
        Ok(rebuilt != 0)
    }

    /// Arms the autograd hooks for the coming backward pass (outputs: with find_unused only).
    pub fn prepare_for_backward(&self, outputs: &[Tensor]) -> Result<()> {
        let ptrs = tensor_ptrs(outputs);
        // SAFETY: the pointers refer to `outputs`, alive for the call.
        let err =
            unsafe { ffi::tb_reducer_prepare_for_backward(self.raw, ptrs.as_ptr(), ptrs.len()) };
        ffi::check("DDP backward", err)
    }

    /// With `static_graph`, after the first backward pass (whose hooks only recorded which
    /// gradients arrived): marks the unused parameters and reduces every bucket.
    pub fn delay_all_reduce(&self) -> Result<()> {
        // SAFETY: live handle.
        let err = crate::rng::blocking(|| unsafe { ffi::tb_reducer_delay_all_reduce(self.raw) });
        ffi::check("allreduce (DDP static graph, first iteration)", err)
    }

    /// Parameter indices per bucket, in the order the buckets are reduced.
    pub fn buckets(&self) -> Result<Vec<Vec<usize>>> {
        let n = self.names.len();
        let (mut indices, mut counts, mut buckets) =
            (vec![0i64; n.max(1)], vec![0i64; n.max(1)], 0usize);
        // SAFETY: buffers of the stated capacities; the shim checks them.
        let err = unsafe {
            ffi::tb_reducer_buckets(
                self.raw,
                indices.as_mut_ptr(),
                indices.len(),
                counts.as_mut_ptr(),
                counts.len(),
                &mut buckets,
            )
        };
        ffi::check("DDP bucket assignment", err)?;
        let mut out = Vec::with_capacity(buckets);
        let mut at = 0;
        for &c in &counts[..buckets] {
            out.push(indices[at..at + c as usize].iter().map(|&i| i as usize).collect());
            at += c as usize;
        }
        Ok(out)
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The gradients averaged over `pg` as this Reducer's backward pass averages them, after a
    /// backward pass it did not watch (a CUDA graph's replay): bucket by bucket, each gradient
    /// times 1/world (`mul_out` into the bucket's view of it, which has the parameter's own
    /// layout), one all-reduce of the bucket, then the sums copied back into the gradients.
    /// So the values are those of the hooks' path, bucket layout and all (which decides the
    /// order of a ring's sums over more than two ranks). Errors: a parameter without a
    /// gradient (named; the Reducer without find_unused_parameters fails too), a failed
    /// all-reduce.
    pub fn average_gradients(&self, pg: &ProcessGroup) -> Result<()> {
        let scale = 1.0 / pg.size() as f64;
        for bucket in self.buckets()? {
            let mut grads = Vec::with_capacity(bucket.len());
            for &i in &bucket {
                let grad = self.params[i].grad();
                if !grad.defined() {
                    return Err(Error::InvalidArgument(format!(
                        "DDP after a CUDA graph replay: {} has no gradient",
                        self.names[i]
                    )));
                }
                grads.push((&self.params[i], grad));
            }
            let Some((_, first)) = grads.first() else { continue };
            let numel: i64 = grads.iter().map(|(p, _)| p.numel() as i64).sum();
            let flat = Tensor::empty([numel], (first.kind(), first.device()));
            let mut offset = 0;
            let mut views = Vec::with_capacity(grads.len());
            for (param, grad) in &grads {
                let (size, stride, n) = (param.size(), param.stride(), param.numel() as i64);
                // c10d's initialize_bucket_views: the parameter's strides where it is dense.
                let mut view = if non_overlapping_and_dense(&size, &stride) {
                    flat.as_strided(&size, &stride, Some(offset))
                } else {
                    flat.narrow(0, offset, n).view(size.as_slice())
                };
                view.copy_(&(grad * scale));
                views.push(view);
                offset += n;
            }
            pg.all_reduce_sum(&flat)?;
            for ((_, grad), view) in grads.iter().zip(&views) {
                let mut grad = grad.shallow_clone();
                grad.copy_(view);
            }
        }
        Ok(())
    }

    /// The Reducer reports unused parameters by index; add their names and trainbook's option.
    fn name_unused(&self, e: Error) -> Error {
        let Error::Dist { op, message } = e else { return e };
        let marker = "did not receive grad for rank";
        let Some(line) = message.lines().find(|l| l.contains(marker)) else {
            return Error::Dist { op, message };
        };
        let names: Vec<&str> = line
            .rsplit(':')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .filter_map(|i| i.parse::<usize>().ok())
            .filter_map(|i| self.names.get(i).map(String::as_str))
            .collect();
        let message = format!(
            "parameters that received no gradient in the last backward pass: {}. If some parameters are legitimately unused in some steps, set DdpOptions::find_unused_parameters (torch's find_unused_parameters=True).\n{message}",
            names.join(", ")
        );
        Error::Dist { op, message }
    }
}

/// c10's `is_non_overlapping_and_dense`: the elements fill a block of memory without gaps,
/// in some order of the dimensions (contiguous, channels_last, ...).
fn non_overlapping_and_dense(size: &[i64], stride: &[i64]) -> bool {
    let mut dims: Vec<usize> = (0..size.len()).filter(|&d| size[d] != 1).collect();
    dims.sort_by_key(|&d| stride[d]);
    let mut expected = 1;
    for d in dims {
        if stride[d] != expected {
            return false;
        }
        expected *= size[d];
    }
    true
}

impl Drop for Reducer {
    fn drop(&mut self) {
        // SAFETY: freed exactly once; removes the autograd hooks.
        unsafe { ffi::tb_reducer_free(self.raw) }
    }
}
