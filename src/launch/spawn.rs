//! `spawn(n, |dist| ...)`: runs a closure as the `n` ranks of a real c10d job, from a notebook
//! cell, a test or any program, and returns every rank's result.
//!
//! Without a launcher the ranks are threads of the calling process (a Jupyter kernel, say),
//! one device each: CUDA `k` for rank `k` when there are enough GPUs (NCCL), else the CPU
//! (Gloo over the loopback), or, when asked, GPUs shared by several ranks (Gloo with CUDA
//! tensors). The closure is the caller's own code, so a hyper-parameter changed in an earlier
//! cell is what the ranks train with; nothing is exported, saved or compiled. Each thread
//! joins the group through its own TCPStore client exactly as a process would, and CPU ranks
//! (and ranks sharing a GPU) take turns on the random generators they share (see
//! `rng::turns`), so a thread rank computes bit for bit what the same rank computes as a
//! process under torchrun. Seed a rank with [`Dist::manual_seed`], which leaves the other GPUs'
//! generators alone (`tch::manual_seed` reseeds every GPU, under the other ranks' feet).
//!
//! Under a launcher (the exported notebook run by `torchrun --nproc-per-node=n`), `spawn`
//! runs the closure once, as this process's rank, and gathers every rank's result through the
//! group: the same code gives the same results both ways.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::Serialize;
use tch::{Device, Kind, Tensor};

use crate::dist::{Backend, Dist, DistOptions, LaunchEnv};
use crate::error::panic_message;
use crate::rng::{rng_state, set_rng_state};
use crate::{Error, Result};

mod layout;

/// Options of [`spawn_with`].
#[derive(Clone, Debug)]
pub struct SpawnOptions {
    /// `None`: CUDA device `k` for rank `k` when at least `n` GPUs are visible, else the CPU.
    /// `Some(Device::Cuda(_))` insists on GPUs (an error when there are fewer than `n`).
    pub device: Option<Device>,
    /// Bound on joining the group and on every collective (as [`DistOptions::timeout`]): a
    /// rank that fails or hangs ends the others within it.
    pub timeout: Duration,
    /// Intra-op CPU threads of each rank. `None`: `OMP_NUM_THREADS` when set, else 1, which is
    /// what torchrun gives each process of a multi-process job.
    pub threads_per_rank: Option<usize>,
    /// Let ranks share GPUs when there are fewer GPUs than ranks (default `false`): rank `k`
    /// then runs on CUDA `k % gpus`, the group uses Gloo with CUDA tensors (NCCL needs a GPU
    /// per rank), and ranks sharing a GPU take turns on its random generator as CPU ranks take
    /// turns on the CPU's. Such thread ranks can run collectives but not
    /// [`Ddp`](crate::train::Ddp), which refuses them (libtorch runs every backward pass of a GPU
    /// on one thread, where DDP would deadlock: seen on an H100); for DDP on shared GPUs, run
    /// the ranks as processes. Under a launcher, processes sharing a GPU use Gloo and train
    /// with DDP.
    pub share_gpus: bool,
}

impl Default for SpawnOptions {
    fn default() -> Self {
        SpawnOptions {
            device: None,
            timeout: DistOptions::default().timeout,
            threads_per_rank: None,
            share_gpus: false,
        }
    }
}

/// Runs `f` as the `nprocs` ranks of a job and returns their results in rank order
/// (`torch.multiprocessing.spawn(fn, nprocs=n)`, but the ranks are threads and the results come
/// back). See [`spawn_with`] for the details; this uses [`SpawnOptions::default`].
///
/// # Example
///
/// ```no_run
/// # fn main() -> trainbook::Result<()> {
/// use trainbook::launch::spawn;
/// use trainbook::tch::{Device, Kind, Tensor};
///
/// let scale = 3.0; // an earlier cell's value: the ranks see it
/// let sums = spawn(2, |dist| {
///     let t = Tensor::from_slice(&[(dist.rank() + 1) as f64 * scale]).to_kind(Kind::Double);
///     dist.all_reduce_sum(&t)?;
///     Ok(t.double_value(&[0]))
/// })?;
/// assert_eq!(sums, vec![9.0, 9.0]);
/// # Ok(()) }
/// ```
pub fn spawn<R, F>(nprocs: usize, f: F) -> Result<Vec<R>>
where
    F: Fn(&Dist) -> Result<R> + Sync,
    R: Serialize + DeserializeOwned + Send,
{
    spawn_with(nprocs, SpawnOptions::default(), f)
}

/// Runs `f` as the `nprocs` ranks of a job and returns every rank's result, in rank order.
///
/// - **No launcher** (a notebook, a test, a plain program): `nprocs` threads of this process,
///   each with its own [`Dist`] in one c10d group, on CUDA `k` or the CPU (see
///   [`SpawnOptions`]). Rank 0's output is printed as it comes ([`Dist::println`] prints on
///   rank 0 only). CPU ranks (and ranks sharing a GPU) run one at a time between collectives
///   so that each draws from its own random stream; when `spawn` returns, this thread's CPU
///   generator (and a shared GPU's) is left where rank 0's (the GPU's first rank's) ended, as
///   in rank 0's process. Seed each rank with [`Dist::manual_seed`], not `tch::manual_seed`.
/// - **Under a launcher** of several ranks (torchrun, srun, ...): `f` runs once, as this
///   process's rank of the launcher's world (a different `nprocs` is noted on stderr), and the
///   results are gathered on every rank through the group (as JSON), so rank 0's program sees
///   all of them. A Jupyter kernel inside a Slurm allocation of one task, or inside a batch
///   script that `srun` did not start, is not a launched rank: it gets thread ranks.
///
/// Errors: [`Error::InvalidArgument`] for `nprocs == 0` or CUDA requested without enough
/// devices; [`Error::Rank`] when a rank's closure fails or panics (the first rank to fail;
/// the others end within the timeout, and their errors are printed on stderr); the errors of
/// [`Dist::init_with`] when the group cannot be formed.
pub fn spawn_with<R, F>(nprocs: usize, opts: SpawnOptions, f: F) -> Result<Vec<R>>
where
    F: Fn(&Dist) -> Result<R> + Sync,
    R: Serialize + DeserializeOwned + Send,
{
    if nprocs == 0 {
        return Err(Error::InvalidArgument("spawn: nprocs must be at least 1".into()));
    }
    // A launched job of several ranks; a kernel inside a Slurm allocation (one task, or a batch
    // script that srun did not start) is not one, and gets thread ranks.
    let launched = LaunchEnv::from_env()?.filter(|e| e.world_size > 1 && e.warnings.is_empty());
    match launched {
        Some(env) => {
            if env.world_size != nprocs {
                eprintln!(
                    "trainbook: spawn({nprocs}) under {} runs as rank {} of the launcher's {} ranks",
                    env.launcher, env.rank, env.world_size
                );
            }
            run_launched(&env, &opts, &f)
        }
        None => run_threads(nprocs, &opts, &f),
    }
}

fn run_launched<R, F>(env: &LaunchEnv, opts: &SpawnOptions, f: &F) -> Result<Vec<R>>
where
    F: Fn(&Dist) -> Result<R>,
    R: Serialize + DeserializeOwned,
{
    // Processes of a node sharing its GPUs cannot form a NCCL group.
    let shared = opts.share_gpus
        && opts.device != Some(Device::Cpu)
        && (visible_gpus() as usize) < env.local_world_size;
    let backend = shared.then_some(Backend::Gloo);
    let dist_opts = DistOptions { device: opts.device, backend, timeout: opts.timeout };
    let dist = Dist::init_with(dist_opts)?;
    let rank = dist.rank();
    let world = dist.world_size();
    let result = f(&dist).map_err(|e| rank_error(rank, world, e))?;
    let gathered = all_gather_json(&dist, &result)?;
    dist.destroy()?;
    Ok(gathered)
}

/// Every rank's `value`, in rank order, exchanged as JSON bytes through the group.
fn all_gather_json<R: Serialize + DeserializeOwned>(dist: &Dist, value: &R) -> Result<Vec<R>> {
    let bytes = serde_json::to_vec(value)
        .map_err(|e| Error::InvalidArgument(format!("spawn: the result cannot be sent: {e}")))?;
    let local = Tensor::from_slice(&bytes).to_kind(Kind::Uint8);
    let len = Tensor::from_slice(&[bytes.len() as i64]).to_device(dist.device());
    let lens: Vec<usize> =
        dist.all_gather(&len)?.iter().map(|l| l.int64_value(&[0]) as usize).collect();
    let all: Vec<u8> = Vec::try_from(dist.all_gather_varlen(&local)?.to_device(Device::Cpu))?;
    let mut out = Vec::with_capacity(lens.len());
    let mut at = 0;
    for (rank, n) in lens.into_iter().enumerate() {
        let part = all.get(at..at + n).ok_or_else(|| Error::Dist {
            op: "spawn: gather results".into(),
            message: "short reply".into(),
        })?;
        out.push(serde_json::from_slice(part).map_err(|e| {
            Error::InvalidArgument(format!("spawn: rank {rank}'s result cannot be read: {e}"))
        })?);
        at += n;
    }
    Ok(out)
}

fn rank_error(rank: usize, world: usize, source: Error) -> Error {
    match source {
        already @ Error::Rank { .. } => already,
        source => Error::Rank { rank, world, source: Box::new(source) },
    }
}

/// CUDA devices libtorch sees (0 without CUDA).
fn visible_gpus() -> i64 {
    if tch::Cuda::is_available() {
        tch::Cuda::device_count()
    } else {
        0
    }
}

/// How one thread rank ended: its result, the final states of the generators it took turns
/// on, and when it ended.
struct RankEnd<R> {
    result: Result<R>,
    rng_states: Vec<(Device, Vec<u8>)>,
    at: Instant,
}

fn run_threads<R, F>(nprocs: usize, opts: &SpawnOptions, f: &F) -> Result<Vec<R>>
where
    F: Fn(&Dist) -> Result<R> + Sync,
    R: Send,
{
    let layout = layout::layout(nprocs, opts.device, visible_gpus() as usize, opts.share_gpus)?;
    let port = crate::dist::free_port()?;
    // Every rank in the rotation starts from the caller's states of the generators it shares.
    let mut shared: Vec<Device> = vec![Device::Cpu];
    for &d in layout.devices.iter().filter(|d| layout.turns && d.is_cuda()) {
        if !shared.contains(&d) {
            shared.push(d);
        }
    }
    let start: Vec<(Device, Vec<u8>)> =
        shared.iter().map(|&d| Ok((d, rng_state(d)?))).collect::<Result<_>>()?;
    let caller_threads = tch::get_num_threads();
    let threads = opts
        .threads_per_rank
        .or_else(|| std::env::var("OMP_NUM_THREADS").ok().and_then(|v| v.parse().ok()))
        .unwrap_or(1)
        .max(1);
    let ends: Vec<RankEnd<R>> = std::thread::scope(|scope| {
        let handles: Vec<_> = layout
            .devices
            .iter()
            .enumerate()
            .map(|(rank, &device)| {
                let place = Place { rank, world: nprocs, device, backend: layout.backend, port };
                // The rank's turn carries the CPU generator and its own GPU's.
                let start: Option<Vec<(Device, Vec<u8>)>> = layout.turns.then(|| {
                    start
                        .iter()
                        .filter(|(d, _)| *d == Device::Cpu || *d == device)
                        .cloned()
                        .collect()
                });
                std::thread::Builder::new()
                    .name(format!("trainbook-rank-{rank}"))
                    .spawn_scoped(scope, move || run_rank(place, threads, opts, start, f))
            })
            .collect();
        handles
            .into_iter()
            .enumerate()
            .map(|(rank, handle)| {
                let joined = handle
                    .map_err(|e| Error::Dist {
                        op: format!("spawn: start rank {rank}'s thread"),
                        message: e.to_string(),
                    })
                    .and_then(|h| h.join().map_err(|p| Error::Panicked(panic_message(p))));
                joined.unwrap_or_else(|e| RankEnd {
                    result: Err(rank_error(rank, nprocs, e)),
                    rng_states: Vec::new(),
                    at: Instant::now(),
                })
            })
            .collect()
    });
    tch::set_num_threads(caller_threads);
    // Each shared generator continues where its first rank's stream ended (the CPU's: rank
    // 0's), unless that rank failed.
    let mut settled: Vec<Device> = Vec::new();
    for (end, &device) in ends.iter().zip(&layout.devices) {
        for (shared, state) in &end.rng_states {
            if !settled.contains(shared) {
                set_rng_state(*shared, state)?;
            }
        }
        for d in [Device::Cpu, device] {
            if !settled.contains(&d) {
                settled.push(d);
            }
        }
    }
    let first_failure = ends
        .iter()
        .enumerate()
        .filter(|(_, e)| e.result.is_err())
        .min_by_key(|(_, e)| e.at)
        .map(|(rank, _)| rank);
    let mut results = Vec::with_capacity(nprocs);
    let mut failure = None;
    for (rank, end) in ends.into_iter().enumerate() {
        match end.result {
            Ok(r) => results.push(r),
            Err(e) if Some(rank) == first_failure => failure = Some(e),
            Err(e) => eprintln!("trainbook: spawn: after that, {e}"),
        }
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(results),
    }
}

/// A thread rank's place in the job.
#[derive(Clone, Copy)]
struct Place {
    rank: usize,
    world: usize,
    device: Device,
    backend: Backend,
    port: u16,
}

/// Rank `place.rank`'s thread: joins the group, takes its turns on the shared generators
/// (starting from `start`, when the layout has turns) and runs `f`.
fn run_rank<R, F>(
    place: Place,
    threads: usize,
    opts: &SpawnOptions,
    start: Option<Vec<(Device, Vec<u8>)>>,
    f: &F,
) -> RankEnd<R>
where
    F: Fn(&Dist) -> Result<R>,
{
    let Place { rank, world, device, backend, port } = place;
    tch::set_num_threads(threads as i32);
    let mut rng_states = Vec::new();
    // When the rank failed: taken before its group is closed, which makes the others fail.
    let mut at = None;
    let result = (|| {
        let dist = Dist::for_thread_rank(rank, world, port, device, backend, opts.timeout)?;
        let turn = start.map(crate::rng::enter).transpose()?;
        let outcome = catch_unwind(AssertUnwindSafe(|| f(&dist)));
        at = Some(Instant::now());
        let states = turn.map(|t| t.finish()).transpose();
        let value = match outcome {
            Ok(value) => value?,
            Err(payload) => return Err(Error::Panicked(panic_message(payload))),
        };
        rng_states = states?.unwrap_or_default();
        at = None;
        dist.destroy()?;
        Ok(value)
    })();
    let at = at.unwrap_or_else(Instant::now);
    RankEnd { result: result.map_err(|e| rank_error(rank, world, e)), rng_states, at }
}
