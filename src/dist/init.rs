//! `Dist`: the whole distributed surface in one small object. `Dist::init()` reads the
//! launcher's environment (torchrun, Slurm's srun, mpirun/mpiexec, trainbook's Ray and Dask
//! launchers, or anything that sets RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT), joins the group, and picks the device; without a launcher it is a world
//! of one where every collective is a no-op, so the same program runs alone or distributed.
use std::fmt::Display;
use std::time::Duration;

use tch::{Device, Kind, Tensor};

use super::{connect, Backend, LaunchEnv, Launcher, ProcessGroup};
use crate::{Error, Result};

/// Options of [`Dist::init_with`].
#[derive(Clone, Debug)]
pub struct DistOptions {
    /// `None`: CUDA device `LOCAL_RANK` when CUDA is available, else the CPU.
    pub device: Option<Device>,
    /// `None`: NCCL for CUDA, Gloo for the CPU.
    pub backend: Option<Backend>,
    /// Bound on every wait (joining, collectives). Default 120 s, or `TRAINBOOK_DIST_TIMEOUT` seconds.
    pub timeout: Duration,
}

impl DistOptions {
    /// Parses a `--device` value: `auto` (CUDA `LOCAL_RANK` if available, else CPU), `cpu`, `cuda`.
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

pub struct Dist {
    env: Option<LaunchEnv>,
    pg: Option<ProcessGroup>,
    device: Device,
}

impl Dist {
    /// Joins the job described by the environment, with default options.
    pub fn init() -> Result<Dist> {
        Dist::init_with(DistOptions::default())
    }

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
        let Some(env) = env.filter(|e| e.world_size > 1) else {
            return Ok(Dist { env: None, pg: None, device });
        };
        let backend =
            opts.backend.unwrap_or(if device.is_cuda() { Backend::Nccl } else { Backend::Gloo });
        if !backend.is_available() {
            return Err(Error::DistEnv(format!(
                "the {backend} backend needs trainbook built with the `cuda` feature"
            )));
        }
        let pg = connect(&env, backend, opts.timeout)?;
        Ok(Dist { env: Some(env), pg: Some(pg), device })
    }

    /// A world of one on `device` (no launcher, no store).
    pub fn single(device: Device) -> Dist {
        Dist { env: None, pg: None, device }
    }

    pub fn rank(&self) -> usize {
        self.pg.as_ref().map_or(0, |p| p.rank())
    }
    pub fn world_size(&self) -> usize {
        self.pg.as_ref().map_or(1, |p| p.size())
    }
    pub fn local_rank(&self) -> usize {
        self.env.as_ref().map_or(0, |e| e.local_rank)
    }
    /// Rank 0: the one that prints, plots and writes files.
    pub fn is_main(&self) -> bool {
        self.rank() == 0
    }
    pub fn is_distributed(&self) -> bool {
        self.pg.is_some()
    }
    pub fn device(&self) -> Device {
        self.device
    }
    pub fn backend(&self) -> Option<Backend> {
        self.pg.as_ref().map(|p| p.backend())
    }
    /// The launcher recognised from the environment (`None`: a world of one without one).
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
    pub fn launch_env(&self) -> Option<&LaunchEnv> {
        self.env.as_ref()
    }
    pub fn process_group(&self) -> Option<&ProcessGroup> {
        self.pg.as_ref()
    }

    /// Prints on the main rank only.
    pub fn println(&self, message: impl Display) {
        if self.is_main() {
            println!("{message}");
        }
    }

    pub fn barrier(&self) -> Result<()> {
        self.pg.as_ref().map_or(Ok(()), |p| p.barrier())
    }
    /// In-place sum over all ranks (identity for a world of one).
    pub fn all_reduce_sum(&self, t: &Tensor) -> Result<()> {
        self.pg.as_ref().map_or(Ok(()), |p| p.all_reduce_sum(t))
    }
    /// Overwrites `t` with rank `root`'s copy.
    pub fn broadcast(&self, t: &Tensor, root: usize) -> Result<()> {
        self.pg.as_ref().map_or(Ok(()), |p| p.broadcast(t, root))
    }
    /// Every rank's `t`, in rank order.
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

    /// Sums f64 values over all ranks.
    pub fn sum_f64(&self, values: &[f64]) -> Result<Vec<f64>> {
        let t = Tensor::from_slice(values).to_kind(Kind::Double).to_device(self.device);
        self.all_reduce_sum(&t)?;
        Ok(Vec::try_from(t.to_device(Device::Cpu))?)
    }

    /// Waits for every rank, then leaves the group (like `destroy_process_group`).
    pub fn destroy(mut self) -> Result<()> {
        let result = self.barrier();
        self.pg = None;
        result
    }
}
