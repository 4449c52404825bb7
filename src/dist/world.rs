//! `Dist` (with `DistOptions`): the whole distributed surface in one small object, this
//! process's place in the world. `Dist::init()` reads the launcher's environment (torchrun,
//! Slurm's srun, mpirun/mpiexec, trainbook's Ray and Dask launchers, or anything that sets
//! RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT), joins the group, and picks the device; without a
//! launcher it is a world of one where every collective is a no-op, so the same program runs
//! alone or distributed.
use std::fmt::Display;
use std::time::Duration;

use tch::{Device, Kind, Tensor};

use super::backend_choice::choose_backend;
use super::process_group::launch_store;
use super::{connect_on_device, default_group_store, Backend, LaunchEnv, Launcher, ProcessGroup};
use crate::{Error, Result};

/// Options of [`Dist::init_with`].
#[derive(Clone, Debug)]
pub struct DistOptions {
    /// `None`: CUDA device `LOCAL_RANK` when CUDA is available, else the CPU.
    pub device: Option<Device>,
    /// `None`: Gloo for the CPU; for CUDA, NCCL when every rank has a GPU of its own, else
    /// Gloo (ranks sharing a GPU, which NCCL refuses).
    pub backend: Option<Backend>,
    /// Bound on every wait (joining the group, each collective), like `init_process_group`'s
    /// `timeout`. Default 120 s, or `TRAINBOOK_DIST_TIMEOUT` seconds when that is set.
    pub timeout: Duration,
}

impl DistOptions {
    /// Parses a `--device` value: `auto` (CUDA `LOCAL_RANK` if available, else CPU), `cpu`, `cuda`.
    /// `cuda` means this rank's GPU: [`Dist::init_with`] replaces the index by `LOCAL_RANK`'s.
    /// Any other name is an [`Error::InvalidArgument`].
    pub fn with_device_name(mut self, name: &str) -> Result<DistOptions> {
        self.device = match name {
            "auto" => None,
            "cpu" => Some(Device::Cpu),
            "cuda" => Some(Device::Cuda(0)),
            other => {
                return Err(Error::InvalidArgument(format!(
                    "device {other:?}: expected auto, cpu or cuda"
                )))
            }
        };
        Ok(self)
    }
}

impl Default for DistOptions {
    fn default() -> Self {
        let secs = std::env::var("TRAINBOOK_DIST_TIMEOUT")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(120);
        DistOptions { device: None, backend: None, timeout: Duration::from_secs(secs) }
    }
}

/// One process's place in the job: its rank, the c10d process group it joined (when the world
/// has more than one rank) and the device it trains on: what
/// `torch.distributed.init_process_group(backend, init_method="env://")` sets up, plus
/// torchrun scripts' usual `torch.device("cuda", LOCAL_RANK)`. In a world of one there is no
/// group and every collective returns at once, so the same program runs alone, in a notebook,
/// or under a launcher.
///
/// Dropping it leaves the group without waiting for the other ranks; [`Dist::destroy`] waits.
///
/// # Example
///
/// ```no_run
/// # fn main() -> trainbook::Result<()> {
/// use trainbook::dist::Dist;
/// // `torchrun --nproc-per-node=2 --no-python ./train`, or `./train` alone (a world of one)
/// let dist = Dist::init()?;
/// dist.println(format!("{} on {:?}", dist.describe(), dist.device()));
/// // ... build the model on `dist.device()`, wrap it in `Ddp`, shard the data by rank ...
/// dist.destroy()?;
/// # Ok(()) }
/// ```
pub struct Dist {
    env: Option<LaunchEnv>,
    pg: Option<ProcessGroup>,
    device: Device,
}

impl Dist {
    /// Joins the job described by the environment with [`DistOptions::default`]: reads the
    /// launcher's variables, picks the device (CUDA `LOCAL_RANK` when available, else the CPU)
    /// and, when the world size is above 1, joins a NCCL (CUDA) or Gloo (CPU) group.
    /// Errors as [`Dist::init_with`].
    pub fn init() -> Result<Dist> {
        Dist::init_with(DistOptions::default())
    }

    /// Joins the job described by the environment with explicit options, blocking until every
    /// rank has joined (at most `opts.timeout`). The device is CUDA `LOCAL_RANK % device_count`
    /// when CUDA is available and `opts.device` is `None` or a CUDA device, else `opts.device`
    /// (or the CPU). A CUDA device becomes the thread's current device at once, before any
    /// CUDA work (`torch.cuda.set_device(local_rank)`), and the group is bound to it
    /// (`init_process_group(device_id=...)`: NCCL connects on it, barriers run on it), so no
    /// rank opens a context on GPU 0 by accident. Unless `opts.backend` names one, the group
    /// uses Gloo on the CPU and, on CUDA, NCCL when every rank has a GPU of its own, else Gloo
    /// (ranks sharing a GPU, which NCCL refuses; decided by all ranks from their GPUs' UUIDs,
    /// with a note on rank 0's stderr). Launcher warnings (e.g. a Slurm batch script run without `srun`) are printed
    /// on stderr.
    ///
    /// Errors: [`Error::DistEnv`] when the launcher's variables are missing or inconsistent,
    /// CUDA was requested but is not available, or NCCL was requested in a build without the
    /// `cuda` feature; [`Error::Dist`] when the TCPStore or the group cannot be joined in time.
    ///
    /// ```no_run
    /// # fn main() -> trainbook::Result<()> {
    /// use std::time::Duration;
    /// use trainbook::dist::{Backend, Dist, DistOptions};
    /// let opts = DistOptions {
    ///     backend: Some(Backend::Gloo),
    ///     timeout: Duration::from_secs(30),
    ///     ..DistOptions::default()
    /// };
    /// let dist = Dist::init_with(opts.with_device_name("cpu")?)?;
    /// assert_eq!(dist.device(), tch::Device::Cpu);
    /// # Ok(()) }
    /// ```
    pub fn init_with(opts: DistOptions) -> Result<Dist> {
        let env = LaunchEnv::from_env()?;
        for warning in env.iter().flat_map(|e| &e.warnings) {
            eprintln!("trainbook: warning: {warning}");
        }
        let local_rank = env.as_ref().map_or(0, |e| e.local_rank);
        let device = match opts.device {
            Some(Device::Cuda(_)) | None if tch::Cuda::is_available() => {
                Device::Cuda(local_rank % tch::Cuda::device_count().max(1) as usize)
            }
            Some(Device::Cuda(_)) => {
                return Err(Error::DistEnv(
                    "a CUDA device was requested but CUDA is not available".into(),
                ))
            }
            Some(d) => d,
            None => Device::Cpu,
        };
        make_current(device)?;
        let Some(env) = env.filter(|e| e.world_size > 1) else {
            return Ok(Dist { env: None, pg: None, device });
        };
        let base = launch_store(&env, opts.timeout)?;
        let backend = match opts.backend {
            Some(b) => b,
            None => choose_backend(&base, &env, device)?,
        };
        if !backend.is_available() {
            return Err(Error::DistEnv(format!(
                "the {backend} backend needs trainbook built with the `cuda` feature"
            )));
        }
        let store = default_group_store(&base, backend)?;
        let (rank, world) = (env.rank, env.world_size);
        let pg = ProcessGroup::on_device(store, backend, rank, world, opts.timeout, device)?;
        Ok(Dist { env: Some(env), pg: Some(pg), device })
    }

    /// Rank `rank` of `world` ranks that are threads of this process ([`spawn`]): joins the
    /// group through a TCPStore on the loopback at `port` (hosted by rank 0), with `backend`
    /// (NCCL for ranks with a GPU each, Gloo for the CPU or a shared GPU). Called on the
    /// rank's own thread: a CUDA device becomes that thread's current device (CUDA's current
    /// device is per thread) before the group, which is bound to it, is created.
    ///
    /// [`spawn`]: crate::launch::spawn
    pub(crate) fn for_thread_rank(
        rank: usize,
        world: usize,
        port: u16,
        device: Device,
        backend: Backend,
        timeout: Duration,
    ) -> Result<Dist> {
        let mut env = LaunchEnv::new(rank, world, "127.0.0.1", port)?;
        env.launcher = Launcher::Threads;
        make_current(device)?;
        if world == 1 {
            return Ok(Dist { env: None, pg: None, device });
        }
        if !backend.is_available() {
            return Err(Error::DistEnv(format!(
                "the {backend} backend needs trainbook built with the `cuda` feature"
            )));
        }
        let pg = connect_on_device(&env, backend, timeout, device)?;
        Ok(Dist { env: Some(env), pg: Some(pg), device })
    }

    /// A world of one on `device` (no launcher, no store, no group), whatever the environment
    /// says: for notebooks and tests that must not join a job.
    pub fn single(device: Device) -> Dist {
        Dist { env: None, pg: None, device }
    }

    /// This process's global rank, 0-based (`torch.distributed.get_rank()`; 0 in a world of
    /// one).
    pub fn rank(&self) -> usize {
        self.pg.as_ref().map_or(0, |p| p.rank())
    }
    /// Number of ranks in the job (`torch.distributed.get_world_size()`; 1 in a world of one).
    pub fn world_size(&self) -> usize {
        self.pg.as_ref().map_or(1, |p| p.size())
    }
    /// Whether this is a `spawn`ed thread rank sharing its GPU with other thread ranks of the
    /// process ([`SpawnOptions::share_gpus`](crate::launch::SpawnOptions::share_gpus)). Such
    /// ranks can run collectives, but not [`Ddp`](crate::train::Ddp), which refuses them:
    /// libtorch runs every backward pass of one GPU on a single thread of its autograd engine,
    /// and DDP's wait for the other ranks' gradients on that thread would block theirs forever.
    pub fn gpu_shared_by_threads(&self) -> bool {
        // spawn's layout gives thread ranks Gloo on CUDA only when they share GPUs.
        self.device.is_cuda()
            && self.env.as_ref().is_some_and(|e| e.launcher == Launcher::Threads)
            && self.pg.as_ref().is_some_and(|p| p.backend() == Backend::Gloo)
    }
    /// This process's rank among those on its node (`LOCAL_RANK`), which picks its GPU; 0 in a
    /// world of one.
    pub fn local_rank(&self) -> usize {
        self.env.as_ref().map_or(0, |e| e.local_rank)
    }
    /// Rank 0: the one that prints, plots and writes files.
    pub fn is_main(&self) -> bool {
        self.rank() == 0
    }
    /// Whether a process group was joined, i.e. the world size is above 1 (unlike
    /// `torch.distributed.is_initialized()`, false for a launched job of one rank).
    pub fn is_distributed(&self) -> bool {
        self.pg.is_some()
    }
    /// The device this rank trains on, chosen at init: create the model's `VarStore` and move
    /// the batches there.
    pub fn device(&self) -> Device {
        self.device
    }
    /// The process group's backend (`torch.distributed.get_backend()`); `None` in a world of
    /// one.
    pub fn backend(&self) -> Option<Backend> {
        self.pg.as_ref().map(|p| p.backend())
    }
    /// The launcher recognised from the environment; `None` in a world of one (also a launched
    /// job of one rank).
    pub fn launcher(&self) -> Option<Launcher> {
        self.env.as_ref().map(|e| e.launcher)
    }
    /// `"2 rank(s) via torchrun"`, or `"1 rank (no launcher)"`: for the programs' first line.
    pub fn describe(&self) -> String {
        match self.launcher() {
            Some(l) => format!("{} rank(s) via {l}", self.world_size()),
            None => "1 rank (no launcher)".into(),
        }
    }
    /// The launcher's variables as read at init (ranks, store address, restart count); `None`
    /// in a world of one.
    pub fn launch_env(&self) -> Option<&LaunchEnv> {
        self.env.as_ref()
    }
    /// The c10d group, for what `Dist` does not wrap (asynchronous collectives,
    /// `broadcast_coalesced`); `None` in a world of one.
    pub fn process_group(&self) -> Option<&ProcessGroup> {
        self.pg.as_ref()
    }

    /// Prints on the main rank only.
    pub fn println(&self, message: impl Display) {
        if self.is_main() {
            println!("{message}");
        }
    }

    /// Blocks until every rank has called it (`torch.distributed.barrier()`); returns at once in
    /// a world of one. Errors: [`Error::Dist`] when a peer is gone or the timeout passes.
    pub fn barrier(&self) -> Result<()> {
        self.pg.as_ref().map_or(Ok(()), |p| p.barrier())
    }
    /// In-place sum of `t` over all ranks (`dist.all_reduce(t, op=ReduceOp.SUM)`; identity for a
    /// world of one). `t` must be on this rank's device for NCCL.
    pub fn all_reduce_sum(&self, t: &Tensor) -> Result<()> {
        self.pg.as_ref().map_or(Ok(()), |p| p.all_reduce_sum(t))
    }
    /// Overwrites `t` with rank `root`'s copy (`dist.broadcast(t, src=root)`); a no-op in a
    /// world of one. Errors: [`Error::InvalidArgument`] when `root` is not below the world size,
    /// [`Error::Dist`] when the collective fails.
    pub fn broadcast(&self, t: &Tensor, root: usize) -> Result<()> {
        self.pg.as_ref().map_or(Ok(()), |p| p.broadcast(t, root))
    }
    /// Every rank's `t`, in rank order (`dist.all_gather`); `t` must have the same shape and
    /// kind on every rank. A world of one returns `[t]`.
    pub fn all_gather(&self, t: &Tensor) -> Result<Vec<Tensor>> {
        match &self.pg {
            Some(p) => p.all_gather(t),
            None => Ok(vec![t.shallow_clone()]),
        }
    }

    /// Concatenates a 1-D tensor whose length may differ between ranks, in rank order.
    pub fn all_gather_varlen(&self, t: &Tensor) -> Result<Tensor> {
        if self.pg.is_none() {
            return Ok(t.shallow_clone());
        }
        let local = t.to_device(self.device).flatten(0, -1);
        let len = Tensor::from_slice(&[local.size()[0]]).to_device(self.device);
        let lens: Vec<i64> = self.all_gather(&len)?.iter().map(|l| l.int64_value(&[0])).collect();
        let max = lens.iter().copied().max().unwrap_or(0);
        let padded = Tensor::zeros([max], (local.kind(), self.device));
        if local.size()[0] > 0 {
            padded.narrow(0, 0, local.size()[0]).copy_(&local);
        }
        let parts = self.all_gather(&padded)?;
        let pieces: Vec<Tensor> =
            parts.iter().zip(&lens).map(|(p, &n)| p.narrow(0, 0, n)).collect();
        Ok(Tensor::cat(&pieces, 0))
    }

    /// Sums f64 values element-wise over all ranks (through a float64 tensor on the device);
    /// a world of one returns them unchanged.
    pub fn sum_f64(&self, values: &[f64]) -> Result<Vec<f64>> {
        let t = Tensor::from_slice(values).to_kind(Kind::Double).to_device(self.device);
        self.all_reduce_sum(&t)?;
        Ok(Vec::try_from(t.to_device(Device::Cpu))?)
    }

    /// Seeds this rank's random generators: the CPU generator and, on a CUDA device, that
    /// GPU's generator only (see [`manual_seed`](super::manual_seed)). Use it in `spawn`ed
    /// ranks instead of `tch::manual_seed`, which reseeds every GPU's generator, also those
    /// that ranks on other GPUs are drawing from at the same time. In a process of its own a
    /// rank gets the same numbers either way.
    ///
    /// ```
    /// # fn main() -> trainbook::Result<()> {
    /// use trainbook::launch::spawn;
    /// use trainbook::tch::{Device, Kind, Tensor};
    /// let draws = spawn(2, |dist| {
    ///     dist.manual_seed(dist.rank() as i64)?; // was: tch::manual_seed(dist.rank() as i64)
    ///     Ok(Tensor::rand([], (Kind::Double, dist.device())).double_value(&[]))
    /// })?;
    /// assert_ne!(draws[0], draws[1]);
    /// # Ok(()) }
    /// ```
    pub fn manual_seed(&self, seed: i64) -> Result<()> {
        super::manual_seed(self.device, seed)
    }

    /// Waits for every rank, then leaves the group (like `destroy_process_group`).
    pub fn destroy(mut self) -> Result<()> {
        let result = self.barrier();
        self.pg = None;
        result
    }
}

/// Makes a CUDA `device` the calling thread's current device (`torch.cuda.set_device`); a CPU
/// device needs nothing.
fn make_current(device: Device) -> Result<()> {
    match device {
        Device::Cuda(i) => crate::shim::set_cuda_device(i),
        _ => Ok(()),
    }
}
