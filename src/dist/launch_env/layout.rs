//! The rank layout every launcher is read into: [`Launcher`], [`LaunchEnv`] and its one checked
//! constructor (rank below world size, local rank below local world size), which each
//! launcher's reader and [`LaunchEnv::new`] go through.
use std::fmt;

use crate::{Error, Result};

/// torchrun's default port, used where the launcher gives no better choice.
pub const DEFAULT_MASTER_PORT: u16 = 29500;

/// Which launcher started this process, as recognised from its environment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Launcher {
    /// `torchrun` (`TORCHELASTIC_RUN_ID` or `TORCHELASTIC_USE_AGENT_STORE` is set).
    Torchrun,
    /// `launchers/ray_launch.py` (`TRAINBOOK_LAUNCHER=ray`).
    Ray,
    /// `launchers/dask_launch.py` (`TRAINBOOK_LAUNCHER=dask`).
    Dask,
    /// RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set by hand or by another launcher.
    Env,
    /// Open MPI's `mpirun` (`OMPI_COMM_WORLD_*`).
    OpenMpi,
    /// An MPICH-family process manager through PMI (`PMI_RANK`, `PMI_SIZE`): MPICH/Hydra
    /// `mpiexec`, Intel MPI, MVAPICH, TACC's `ibrun`.
    Pmi,
    /// Slurm's `srun` (`SLURM_PROCID`, `SLURM_NTASKS`).
    Slurm,
    /// Threads of one process started by [`spawn`](crate::launch::spawn) (no environment).
    Threads,
}

impl fmt::Display for Launcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Launcher::Torchrun => "torchrun",
            Launcher::Ray => "ray",
            Launcher::Dask => "dask",
            Launcher::Env => "environment (RANK/WORLD_SIZE)",
            Launcher::OpenMpi => "open-mpi (mpirun)",
            Launcher::Pmi => "mpich/pmi (mpiexec)",
            Launcher::Slurm => "slurm (srun)",
            Launcher::Threads => "threads (trainbook::launch::spawn)",
        })
    }
}

/// What the launcher tells each worker process about its place in the job, normalised from
/// torchrun's, MPI's or Slurm's variables. Invariants checked when built: `rank < world_size`
/// and `local_rank < local_world_size`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchEnv {
    /// Which launcher set the variables.
    pub launcher: Launcher,
    /// Global rank, 0-based (`RANK`, `OMPI_COMM_WORLD_RANK`, `PMI_RANK` or `SLURM_PROCID`).
    pub rank: usize,
    /// Rank among the processes on this node (`LOCAL_RANK`, ...): picks the GPU. Defaults to
    /// `rank` when the launcher does not say.
    pub local_rank: usize,
    /// Number of processes in the job (`WORLD_SIZE`, ...).
    pub world_size: usize,
    /// Number of processes on this node (`LOCAL_WORLD_SIZE`, ...); defaults to `world_size`.
    pub local_world_size: usize,
    /// Host of the rendezvous TCPStore (`MASTER_ADDR`, or the launcher-specific default).
    pub master_addr: String,
    /// Port of the rendezvous TCPStore (`MASTER_PORT`; else 29500 + `SLURM_JOB_ID % 1000` under
    /// Slurm and [`DEFAULT_MASTER_PORT`] under MPI).
    pub master_port: u16,
    /// `TORCHELASTIC_USE_AGENT_STORE=True`: torchrun's agent hosts the TCPStore and every
    /// rank (rank 0 included) connects to it as a client.
    pub agent_store: bool,
    /// `TORCHELASTIC_RESTART_COUNT` (or `TRAINBOOK_RESTART_COUNT` from trainbook's launchers):
    /// how often the launcher restarted the worker group.
    pub restart_count: u32,
    /// Things about the environment that are probably a mistake but not fatal (printed by
    /// `Dist::init`), e.g. a Slurm batch script that was not started with `srun`.
    pub warnings: Vec<String>,
}

impl LaunchEnv {
    /// A layout built by hand, for a launcher trainbook does not read (`launcher` is
    /// [`Launcher::Env`], and the node holds the whole world: `local_rank = rank`,
    /// `local_world_size = world_size`; set the public fields to say otherwise). Errors:
    /// [`Error::DistEnv`] when `rank` is not below `world_size`.
    ///
    /// ```
    /// use trainbook::dist::{LaunchEnv, Launcher};
    ///
    /// let env = LaunchEnv::new(1, 4, "node01", 29500)?;
    /// assert_eq!((env.launcher, env.local_rank, env.local_world_size), (Launcher::Env, 1, 4));
    /// assert!(env.describe().starts_with("rank 1/4"));
    /// assert!(LaunchEnv::new(4, 4, "node01", 29500).is_err());
    /// # Ok::<(), trainbook::Error>(())
    /// ```
    pub fn new(
        rank: usize,
        world_size: usize,
        master_addr: impl Into<String>,
        master_port: u16,
    ) -> Result<LaunchEnv> {
        Self::checked(
            Launcher::Env,
            [rank, world_size, rank, world_size],
            ["rank", "world_size", "local_rank", "local_world_size"],
            master_addr.into(),
            master_port,
        )
    }

    /// The layout `[rank, world_size, local_rank, local_world_size]` once checked: rank below
    /// world size, local rank below local world size (an [`Error::DistEnv`] naming the
    /// variables in `names`, in the same order, otherwise). No agent store, no restart, no
    /// warnings: callers set those fields.
    pub(super) fn checked(
        launcher: Launcher,
        [rank, world_size, local_rank, local_world_size]: [usize; 4],
        names: [&str; 4],
        master_addr: String,
        master_port: u16,
    ) -> Result<LaunchEnv> {
        let [rank_name, world_name, local_rank_name, local_world_name] = names;
        if world_size == 0 || rank >= world_size {
            return Err(Error::DistEnv(format!(
                "{rank_name}={rank} must be below {world_name}={world_size}"
            )));
        }
        if local_world_size == 0 || local_rank >= local_world_size {
            return Err(Error::DistEnv(format!(
                "{local_rank_name}={local_rank} must be below {local_world_name}={local_world_size}"
            )));
        }
        Ok(LaunchEnv {
            launcher,
            rank,
            local_rank,
            world_size,
            local_world_size,
            master_addr,
            master_port,
            agent_store: false,
            restart_count: 0,
            warnings: Vec::new(),
        })
    }

    /// A world of one on this machine (no launcher): rank 0 hosts a store on a free local port.
    pub fn single_process() -> Result<LaunchEnv> {
        let port = crate::dist::free_port()?;
        Self::new(0, 1, "127.0.0.1", port)
    }

    /// Whether this process hosts the TCPStore (rank 0, unless torchrun's agent hosts it).
    pub fn hosts_store(&self) -> bool {
        self.rank == 0 && !self.agent_store
    }

    /// The store key scope of a restarted attempt (`None` for the first attempt, whose keys are
    /// exactly PyTorch's). torchrun's agent keeps one store across restarts, so the keys of a
    /// dead attempt would still be there: a new rank would read a peer's old address and fail
    /// to connect. (PyTorch 2.13's own ranks fail that way after a restart with Gloo.)
    pub fn restart_scope(&self) -> Option<String> {
        (self.restart_count > 0).then(|| format!("trainbook/attempt_{}/", self.restart_count))
    }

    /// One line for logs: `rank 1/4 (local 1/2) via slurm (srun), store at node01:29517`.
    pub fn describe(&self) -> String {
        format!(
            "rank {}/{} (local {}/{}) via {}, store at {}:{}",
            self.rank,
            self.world_size,
            self.local_rank,
            self.local_world_size,
            self.launcher,
            self.master_addr,
            self.master_port
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_checks_the_ranks() {
        let e = LaunchEnv::new(0, 1, "127.0.0.1", 1234).unwrap();
        assert_eq!(
            (e.launcher, e.master_addr.as_str(), e.master_port),
            (Launcher::Env, "127.0.0.1", 1234)
        );
        assert!(e.hosts_store() && !e.agent_store && e.warnings.is_empty());
        let err = LaunchEnv::new(2, 2, "h", 1).unwrap_err().to_string();
        assert!(err.contains("rank=2 must be below world_size=2"), "{err}");
        assert!(LaunchEnv::new(0, 0, "h", 1).is_err());
        let err = LaunchEnv::checked(
            Launcher::Slurm,
            [1, 4, 2, 2],
            ["R", "W", "LR", "LW"],
            "h".into(),
            1,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("LR=2 must be below LW=2"), "{err}");
    }
}
