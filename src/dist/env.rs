//! Reads the rank layout a launcher puts in the environment: torchrun (and anything else that
//! sets RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, like trainbook's Ray and Dask launchers), Open
//! MPI's `mpirun`, MPICH/Intel MPI's PMI (`mpiexec`, `ibrun`), and Slurm's `srun` (the last three
//! in `hpc_env.rs`).
use std::collections::HashMap;
use std::fmt;

use super::env_vars::{check_ranks, Vars};
use super::hpc_env;
use crate::{Error, Result};

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
/// torchrun's, MPI's or Slurm's variables. Invariants checked when read: `rank < world_size`
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
    /// Slurm and [`DEFAULT_MASTER_PORT`](super::DEFAULT_MASTER_PORT) under MPI).
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
    /// Reads the process environment; `Ok(None)` when no launcher is recognised. Errors:
    /// [`Error::DistEnv`] naming the variable that is missing or malformed (e.g. `RANK` set
    /// without `WORLD_SIZE`, `RANK=3` with `WORLD_SIZE=2`, a bad `MASTER_PORT`).
    pub fn from_env() -> Result<Option<LaunchEnv>> {
        let vars: HashMap<String, String> = std::env::vars().collect();
        Self::from_map(&vars)
    }

    /// Same as [`from_env`](Self::from_env) over an explicit variable map (used by tests).
    ///
    /// Precedence, most explicit first: RANK/WORLD_SIZE (torchrun, Ray, Dask, by hand), then
    /// Open MPI, then PMI, then Slurm. So `torchrun` or `mpirun` inside a Slurm allocation is
    /// read as what it is, and PMI wins over Slurm because Hydra-based `mpiexec` starts one
    /// Slurm task per node, whose SLURM_PROCID is a node index rather than a rank.
    pub fn from_map(vars: &HashMap<String, String>) -> Result<Option<LaunchEnv>> {
        let v = Vars(vars);
        if v.has("WORLD_SIZE") || v.has("RANK") {
            return Self::from_rank_vars(&v).map(Some);
        }
        if v.has("OMPI_COMM_WORLD_RANK") || v.has("OMPI_COMM_WORLD_SIZE") {
            return hpc_env::open_mpi(&v).map(Some);
        }
        if v.has("PMI_RANK") || v.has("PMI_SIZE") {
            return hpc_env::pmi(&v).map(Some);
        }
        if v.has("SLURM_PROCID") {
            return hpc_env::slurm(&v).map(Some);
        }
        Ok(None)
    }

    /// torchrun's variables (also what trainbook's Ray and Dask launchers set).
    fn from_rank_vars(v: &Vars) -> Result<LaunchEnv> {
        let hint = "a launcher such as torchrun sets it";
        let rank = v.number("RANK", hint)?;
        let world_size = v.number("WORLD_SIZE", hint)?;
        let local_rank = v.optional_number("LOCAL_RANK")?.unwrap_or(rank);
        let local_world_size = v.optional_number("LOCAL_WORLD_SIZE")?.unwrap_or(world_size);
        let master_addr =
            v.get("MASTER_ADDR").ok_or_else(|| Error::DistEnv("MASTER_ADDR is not set".into()))?;
        let master_port = v.port_or(None)?;
        let agent_store = v
            .get("TORCHELASTIC_USE_AGENT_STORE")
            .is_some_and(|x| x.eq_ignore_ascii_case("true") || x == "1");
        let launcher = match v.get("TRAINBOOK_LAUNCHER").as_deref() {
            Some("ray") => Launcher::Ray,
            Some("dask") => Launcher::Dask,
            _ if agent_store || v.has("TORCHELASTIC_RUN_ID") => Launcher::Torchrun,
            _ => Launcher::Env,
        };
        let e = LaunchEnv {
            launcher,
            rank,
            local_rank,
            world_size,
            local_world_size,
            master_addr,
            master_port,
            agent_store,
            restart_count: v.restart_count()?,
            warnings: Vec::new(),
        };
        check_ranks(&e, ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"])?;
        Ok(e)
    }

    /// A world of one on this machine (no launcher): rank 0 hosts a store on a free local port.
    pub fn single_process() -> Result<LaunchEnv> {
        let port = super::free_port()?;
        Ok(LaunchEnv {
            launcher: Launcher::Env,
            rank: 0,
            local_rank: 0,
            world_size: 1,
            local_world_size: 1,
            master_addr: "127.0.0.1".into(),
            master_port: port,
            agent_store: false,
            restart_count: 0,
            warnings: Vec::new(),
        })
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

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn no_launcher_means_none() {
        assert_eq!(LaunchEnv::from_map(&env(&[("HOME", "/root")])).unwrap(), None);
    }

    #[test]
    fn torchrun_agent_store_layout() {
        let e = LaunchEnv::from_map(&env(&[
            ("RANK", "2"),
            ("LOCAL_RANK", "0"),
            ("WORLD_SIZE", "4"),
            ("LOCAL_WORLD_SIZE", "2"),
            ("MASTER_ADDR", "node1"),
            ("MASTER_PORT", "29500"),
            ("TORCHELASTIC_USE_AGENT_STORE", "True"),
            ("TORCHELASTIC_RESTART_COUNT", "1"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!((e.rank, e.local_rank, e.world_size, e.local_world_size), (2, 0, 4, 2));
        assert!(e.agent_store && !e.hosts_store());
        assert_eq!(e.launcher, Launcher::Torchrun);
        assert_eq!(e.restart_scope().as_deref(), Some("trainbook/attempt_1/"));
    }

    #[test]
    fn rank_zero_hosts_without_agent() {
        let e = LaunchEnv::from_map(&env(&[
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", "1234"),
        ]))
        .unwrap()
        .unwrap();
        assert!(e.hosts_store());
        assert_eq!((e.local_rank, e.local_world_size, e.restart_count), (0, 2, 0));
        assert_eq!(e.restart_scope(), None, "a first attempt uses exactly PyTorch's keys");
        assert_eq!(e.launcher, Launcher::Env);
    }

    #[test]
    fn trainbook_launchers_name_themselves() {
        for (name, launcher) in [("ray", Launcher::Ray), ("dask", Launcher::Dask)] {
            let e = LaunchEnv::from_map(&env(&[
                ("RANK", "1"),
                ("WORLD_SIZE", "2"),
                ("MASTER_ADDR", "10.0.0.5"),
                ("MASTER_PORT", "40000"),
                ("TRAINBOOK_LAUNCHER", name),
                ("TRAINBOOK_RESTART_COUNT", "2"),
            ]))
            .unwrap()
            .unwrap();
            assert_eq!(
                (e.launcher, e.rank, e.restart_count, e.agent_store),
                (launcher, 1, 2, false)
            );
            assert!(e.describe().contains(&format!("via {name}")), "{}", e.describe());
        }
    }

    #[test]
    fn rank_variables_win_over_mpi_and_slurm() {
        // torchrun started inside a Slurm allocation by mpirun: torchrun's own layout counts.
        let e = LaunchEnv::from_map(&env(&[
            ("RANK", "3"),
            ("WORLD_SIZE", "4"),
            ("MASTER_ADDR", "h"),
            ("MASTER_PORT", "29500"),
            ("TORCHELASTIC_RUN_ID", "none"),
            ("OMPI_COMM_WORLD_RANK", "0"),
            ("OMPI_COMM_WORLD_SIZE", "1"),
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "1"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!((e.launcher, e.rank, e.world_size), (Launcher::Torchrun, 3, 4));
    }

    #[test]
    fn bad_values_name_the_variable() {
        let cases = [
            (env(&[("RANK", "0")]), "WORLD_SIZE"),
            (
                env(&[
                    ("RANK", "3"),
                    ("WORLD_SIZE", "2"),
                    ("MASTER_ADDR", "h"),
                    ("MASTER_PORT", "1"),
                ]),
                "RANK=3",
            ),
            (env(&[("RANK", "x"), ("WORLD_SIZE", "2")]), "RANK=\"x\""),
            (env(&[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_PORT", "1")]), "MASTER_ADDR"),
            (
                env(&[
                    ("RANK", "0"),
                    ("WORLD_SIZE", "2"),
                    ("MASTER_ADDR", "h"),
                    ("MASTER_PORT", "70000"),
                ]),
                "MASTER_PORT",
            ),
            (
                env(&[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "h")]),
                "MASTER_PORT is not set",
            ),
            (
                env(&[
                    ("RANK", "1"),
                    ("LOCAL_RANK", "2"),
                    ("LOCAL_WORLD_SIZE", "2"),
                    ("WORLD_SIZE", "4"),
                    ("MASTER_ADDR", "h"),
                    ("MASTER_PORT", "1"),
                ]),
                "LOCAL_RANK=2",
            ),
        ];
        for (vars, needle) in cases {
            let err = LaunchEnv::from_map(&vars).unwrap_err().to_string();
            assert!(err.contains(needle), "{err:?} should mention {needle}");
        }
    }
}
