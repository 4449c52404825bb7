//! Which launcher started this process: [`LaunchEnv::from_env`] and [`LaunchEnv::from_map`]
//! look for each launcher's variables in order of precedence and hand the map to its reader.
use std::collections::HashMap;

use super::layout::LaunchEnv;
use super::vars::Vars;
use super::{mpi, slurm, torchrun};
use crate::Result;

impl LaunchEnv {
    /// Reads the process environment; `Ok(None)` when no launcher is recognised. Errors:
    /// [`Error::DistEnv`](crate::Error::DistEnv) naming the variable that is missing or
    /// malformed (e.g. `RANK` set without `WORLD_SIZE`, `RANK=3` with `WORLD_SIZE=2`, a bad
    /// `MASTER_PORT`).
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
            return torchrun::from_rank_vars(&v).map(Some);
        }
        if v.has("OMPI_COMM_WORLD_RANK") || v.has("OMPI_COMM_WORLD_SIZE") {
            return mpi::open_mpi(&v).map(Some);
        }
        if v.has("PMI_RANK") || v.has("PMI_SIZE") {
            return mpi::pmi(&v).map(Some);
        }
        if v.has("SLURM_PROCID") {
            return slurm::srun(&v).map(Some);
        }
        Ok(None)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::dist::Launcher;

    /// A variable map from `NAME`/value pairs, for the launchers' tests.
    pub(in crate::dist::launch_env) fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    /// The layout read from `NAME`/value pairs.
    pub(in crate::dist::launch_env) fn layout(pairs: &[(&str, &str)]) -> Result<Option<LaunchEnv>> {
        LaunchEnv::from_map(&env(pairs))
    }

    #[test]
    fn no_launcher_means_none() {
        assert_eq!(LaunchEnv::from_map(&env(&[("HOME", "/root")])).unwrap(), None);
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
}
