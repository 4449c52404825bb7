//! A c10d process group (Gloo for CPU tensors, NCCL for CUDA tensors) and its collectives:
//! all-reduce (sum), broadcast, all-gather and barrier on tch tensors; [`connect`] joins the
//! default group the way `init_process_group(init_method="env://")` does.
use std::os::raw::c_void;
use std::str::FromStr;
use std::time::Duration;

use tch::{Device, Tensor};

use super::store::{duration_ms, Store};
use super::LaunchEnv;
use crate::shim::c10d as ffi;
use crate::{Error, Result};

/// Joins the process group described by `env`: connects to (or hosts) the TCPStore at
/// MASTER_ADDR:MASTER_PORT and creates the group with the store keys of
/// `torch.distributed.init_process_group(init_method="env://")`, so PyTorch ranks and
/// trainbook ranks can form one group. Every wait is bounded by `timeout`; a missing peer is
/// an error naming what was awaited.
///
/// A restarted attempt (TORCHELASTIC_RESTART_COUNT > 0) scopes its keys further
/// ([`LaunchEnv::restart_scope`](super::LaunchEnv::restart_scope)), so that it never reads the keys of the attempt that died.
pub fn connect(env: &LaunchEnv, backend: Backend, timeout: Duration) -> Result<ProcessGroup> {
    connect_on_device(env, backend, timeout, Device::Cpu)
}

/// [`connect`] for a rank that works on `device`: on a CUDA device the group is bound to it as
/// `init_process_group(device_id=device)` binds it (see [`ProcessGroup::on_device`]). Make the
/// device the thread's current one first (as [`Dist`](super::Dist) does).
pub fn connect_on_device(
    env: &LaunchEnv,
    backend: Backend,
    timeout: Duration,
    device: Device,
) -> Result<ProcessGroup> {
    let base = launch_store(env, timeout)?;
    let store = default_group_store(&base, backend)?;
    ProcessGroup::on_device(store, backend, env.rank, env.world_size, timeout, device)
}

/// The job's launch store: the TCPStore at `MASTER_ADDR:MASTER_PORT` (hosted by rank 0 unless
/// the launcher's agent hosts it), scoped to the launcher's restart when it restarts ranks.
pub(crate) fn launch_store(env: &LaunchEnv, timeout: Duration) -> Result<Store> {
    let mut base = Store::tcp(
        &env.master_addr,
        env.master_port,
        env.hosts_store(),
        Some(env.world_size),
        timeout,
    )?;
    if let Some(scope) = env.restart_scope() {
        base = base.with_prefix(&scope)?;
    }
    Ok(base)
}

/// The view of the launch store that torch's default group uses: `init_process_group` scopes
/// the store to `default_pg`, the group to its name `0/`, and its backend to the device type
/// (keys such as `default_pg/0//cpu//0/1`, where Gloo publishes rank 1's address).
pub fn default_group_store(base: &Store, backend: Backend) -> Result<Store> {
    let device = match backend {
        Backend::Gloo => "cpu/",
        Backend::Nccl => "cuda/",
    };
    base.with_prefix("default_pg")?.with_prefix("0/")?.with_prefix(device)
}

/// The communication library behind a process group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Gloo: CPU tensors, works everywhere.
    Gloo,
    /// NCCL: CUDA tensors; needs the `cuda` cargo feature and a GPU.
    Nccl,
}

impl Backend {
    /// Whether this build of trainbook can create a group of this backend.
    pub fn is_available(self) -> bool {
        match self {
            Backend::Gloo => true,
            Backend::Nccl => crate::shim::has_nccl(),
        }
    }
}

impl FromStr for Backend {
    type Err = Error;
    fn from_str(s: &str) -> Result<Backend> {
        match s.to_ascii_lowercase().as_str() {
            "gloo" => Ok(Backend::Gloo),
            "nccl" => Ok(Backend::Nccl),
            other => Err(Error::InvalidArgument(format!(
                "unknown backend {other:?} (expected gloo or nccl)"
            ))),
        }
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backend::Gloo => "gloo",
            Backend::Nccl => "nccl",
        })
    }
}

/// A c10d process group (`ProcessGroupGloo` or `ProcessGroupNCCL`, what
/// `torch.distributed.new_group` returns): `size` ranks that run collectives together, one
/// object per process. Usually reached through [`Dist`](super::Dist), which creates it. Every
/// collective is bounded by the group's [`timeout`](Self::timeout); a failure (a peer gone, a
/// timeout, tensors that differ between ranks) is an [`Error::Dist`] naming the operation.
/// Collectives run in place on the given tensors: CPU tensors for Gloo, CUDA tensors for NCCL.
pub struct ProcessGroup {
    raw: *mut ffi::TbPg,
    rank: usize,
    size: usize,
    backend: Backend,
    timeout: Duration,
    bound_device: Option<Device>,
    // The group keeps using its store (e.g. for NCCL unique ids); keep it alive as long.
    _store: Store,
}

// SAFETY: c10d backends accept collectives from any thread; the handle is freed only in Drop.
unsafe impl Send for ProcessGroup {}
unsafe impl Sync for ProcessGroup {}

/// An in-flight collective (c10d's `Work`, what `async_op=True` returns). Wait on it before
/// reading the tensors it writes; it keeps them alive until then. Dropping it without waiting
/// does not cancel the operation.
#[must_use = "a collective's result is only valid after wait()"]
pub struct Work {
    raw: *mut ffi::TbWork,
    op: &'static str,
    // Keeps the tensors the collective reads and writes alive until it completes.
    _tensors: Vec<Tensor>,
}

// SAFETY: c10d Work objects may be waited on from any thread.
unsafe impl Send for Work {}

impl Work {
    /// Blocks until the collective finished; errors name the operation (e.g. a peer that died).
    pub fn wait(self) -> Result<()> {
        // SAFETY: `raw` is a live work handle; it is freed by Drop after this returns.
        let err = crate::rng::blocking(|| unsafe { ffi::tb_work_wait(self.raw, 0) });
        ffi::check(self.op, err)
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        // SAFETY: freed exactly once; c10d keeps the operation alive internally if still running.
        unsafe { ffi::tb_work_free(self.raw) }
    }
}

impl ProcessGroup {
    /// Creates the group; blocks until all `size` ranks joined through `store` (or `timeout`).
    /// For PyTorch ranks to join the same group, scope `store` as torch does (see
    /// [`default_group_store`](default_group_store)). Errors:
    /// [`Error::InvalidArgument`] when `rank >= size`; [`Error::Dist`] when the group cannot be
    /// created (NCCL in a build without the `cuda` feature, peers missing at the timeout).
    pub fn new(
        store: Store,
        backend: Backend,
        rank: usize,
        size: usize,
        timeout: Duration,
    ) -> Result<ProcessGroup> {
        ProcessGroup::on_device(store, backend, rank, size, timeout, Device::Cpu)
    }

    /// [`ProcessGroup::new`] for a rank that works on `device`. A CUDA device binds the group
    /// to it, as `init_process_group(device_id=device)` does: NCCL creates its communicator on
    /// that device at once, and barriers run there instead of on a guessed device. A CPU
    /// device binds nothing (exactly [`ProcessGroup::new`]).
    pub fn on_device(
        store: Store,
        backend: Backend,
        rank: usize,
        size: usize,
        timeout: Duration,
        device: Device,
    ) -> Result<ProcessGroup> {
        if rank >= size {
            return Err(Error::InvalidArgument(format!(
                "rank {rank} is not below world size {size}"
            )));
        }
        let id = match backend {
            Backend::Gloo => ffi::BACKEND_GLOO,
            Backend::Nccl => ffi::BACKEND_NCCL,
        };
        let (bound_device, cuda_device) = match device {
            Device::Cuda(i) => (Some(device), i as i32),
            _ => (None, -1),
        };
        let mut raw = std::ptr::null_mut();
        // SAFETY: the store handle is live; on success `raw` is an owned process-group handle.
        let err = crate::rng::blocking(|| unsafe {
            ffi::tb_pg_new(
                store.raw(),
                id,
                rank as i32,
                size as i32,
                duration_ms(timeout),
                cuda_device,
                &mut raw,
            )
        });
        ffi::check(
            &format!(
                "create {backend} process group (rank {rank} of {size}) via {}",
                store.description()
            ),
            err,
        )
        .map_err(|e| match e {
            Error::Dist { op, message } => {
                Error::Dist { op, message: super::nccl_error::explain_nccl_error(message) }
            }
            other => other,
        })?;
        Ok(ProcessGroup { raw, rank, size, backend, timeout, bound_device, _store: store })
    }

    /// This process's rank in the group, 0-based (`pg.rank()`).
    pub fn rank(&self) -> usize {
        self.rank
    }
    /// Number of ranks in the group (`pg.size()`).
    pub fn size(&self) -> usize {
        self.size
    }
    /// Gloo or NCCL.
    pub fn backend(&self) -> Backend {
        self.backend
    }
    /// The bound on joining and on every collective, as given to [`ProcessGroup::new`].
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
    /// The store the group was created with (scoped as given to [`ProcessGroup::new`]): a
    /// further group over the same ranks takes a prefix of it.
    pub(crate) fn store(&self) -> &Store {
        &self._store
    }

    /// The CUDA device the group is bound to (torch's `bound_device_id`); `None` for a group
    /// made without one ([`ProcessGroup::new`], a CPU rank).
    pub fn bound_device(&self) -> Option<Device> {
        self.bound_device
    }

    fn start(
        &self,
        op: &'static str,
        tensors: Vec<Tensor>,
        call: impl FnOnce(*mut *mut ffi::TbWork) -> *mut std::os::raw::c_char,
    ) -> Result<Work> {
        let mut raw = std::ptr::null_mut();
        ffi::check(op, call(&mut raw))?;
        Ok(Work { raw, op, _tensors: tensors })
    }

    /// Starts an in-place sum of `tensor` over all ranks.
    pub fn all_reduce_sum_async(&self, tensor: &Tensor) -> Result<Work> {
        let keep = tensor.shallow_clone();
        // SAFETY: the tensor pointer is valid while `keep` lives, which the Work owns.
        self.start("allreduce", vec![keep], |out| unsafe {
            ffi::tb_pg_allreduce_sum(self.raw, tensor.as_ptr() as *const c_void, out)
        })
    }

    /// In-place sum of `tensor` over all ranks.
    pub fn all_reduce_sum(&self, tensor: &Tensor) -> Result<()> {
        self.all_reduce_sum_async(tensor)?.wait()
    }

    /// Starts overwriting `tensor` on every rank with `root`'s copy.
    pub fn broadcast_async(&self, tensor: &Tensor, root: usize) -> Result<Work> {
        self.check_rank(root)?;
        let keep = tensor.shallow_clone();
        // SAFETY: as in all_reduce_sum_async.
        self.start("broadcast", vec![keep], |out| unsafe {
            ffi::tb_pg_broadcast(self.raw, tensor.as_ptr() as *const c_void, root as i32, out)
        })
    }

    /// Overwrites `tensor` on every rank with `root`'s copy.
    pub fn broadcast(&self, tensor: &Tensor, root: usize) -> Result<()> {
        self.broadcast_async(tensor, root)?.wait()
    }

    /// Returns every rank's `tensor`, in rank order (same shape and kind on all ranks).
    pub fn all_gather(&self, tensor: &Tensor) -> Result<Vec<Tensor>> {
        let outputs: Vec<Tensor> = (0..self.size).map(|_| tensor.empty_like()).collect();
        let ptrs: Vec<*const c_void> =
            outputs.iter().map(|t| t.as_ptr() as *const c_void).collect();
        let mut keep: Vec<Tensor> = outputs.iter().map(Tensor::shallow_clone).collect();
        keep.push(tensor.shallow_clone());
        // SAFETY: every pointer refers to a tensor kept alive by `keep` for the Work's lifetime.
        let work = self.start("allgather", keep, |out| unsafe {
            ffi::tb_pg_all_gather(
                self.raw,
                tensor.as_ptr() as *const c_void,
                ptrs.as_ptr(),
                ptrs.len(),
                out,
            )
        })?;
        work.wait()?;
        Ok(outputs)
    }

    /// Blocks until every rank reached the barrier.
    pub fn barrier(&self) -> Result<()> {
        // SAFETY: the group handle is live for the call.
        self.start("barrier", Vec::new(), |out| unsafe { ffi::tb_pg_barrier(self.raw, out) })?
            .wait()
    }

    /// Overwrites `tensors` on every rank with `root`'s copies, flattened into collectives of at
    /// most `buffer_bytes` each (c10d's `broadcast_coalesced`, as torch DDP syncs module states).
    pub fn broadcast_coalesced(
        &self,
        tensors: &[Tensor],
        buffer_bytes: usize,
        root: usize,
    ) -> Result<()> {
        self.check_rank(root)?;
        let ptrs = tensor_ptrs(tensors);
        // SAFETY: the pointers refer to `tensors`, alive for the (blocking) call.
        let err = crate::rng::blocking(|| unsafe {
            ffi::tb_pg_broadcast_coalesced(
                self.raw,
                ptrs.as_ptr(),
                ptrs.len(),
                buffer_bytes as i64,
                root as i32,
            )
        });
        ffi::check("broadcast_coalesced", err)
    }

    /// Fails on every rank when the ranks hold different parameter lists (count, shapes,
    /// strides): c10d's `verify_params_across_processes`, the check torch DDP starts with.
    pub fn verify_params_across_processes(&self, params: &[Tensor]) -> Result<()> {
        let ptrs = tensor_ptrs(params);
        // SAFETY: as in broadcast_coalesced.
        let err = crate::rng::blocking(|| unsafe {
            ffi::tb_pg_verify_params(self.raw, ptrs.as_ptr(), ptrs.len())
        });
        ffi::check("verify parameters across processes", err)
    }

    pub(super) fn raw(&self) -> *mut ffi::TbPg {
        self.raw
    }

    fn check_rank(&self, rank: usize) -> Result<()> {
        if rank < self.size {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!(
                "rank {rank} is not below world size {}",
                self.size
            )))
        }
    }
}

/// The `at::Tensor*` of each tensor, for the shim's list arguments.
pub(super) fn tensor_ptrs(tensors: &[Tensor]) -> Vec<*const c_void> {
    tensors.iter().map(|t| t.as_ptr() as *const c_void).collect()
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        // SAFETY: freed exactly once.
        unsafe { ffi::tb_pg_free(self.raw) }
    }
}
