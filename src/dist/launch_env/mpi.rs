//! MPI launchers: Open MPI's `mpirun` (`OMPI_COMM_WORLD_*`), and MPICH-family process managers
//! (Hydra `mpiexec`, Intel MPI, MVAPICH, TACC's `ibrun`) through PMI. They say who is who but
//! not where rank 0's TCPStore lives: MASTER_ADDR defaults to the loopback when all ranks share
//! one node (and must be given otherwise), MASTER_PORT to [`DEFAULT_MASTER_PORT`].
use super::layout::{LaunchEnv, Launcher, DEFAULT_MASTER_PORT};
use super::vars::Vars;
use crate::{Error, Result};

/// `mpirun` from Open MPI. Nothing tells where rank 0 runs, so a job across nodes must pass
/// MASTER_ADDR (`mpirun -x MASTER_ADDR=...`); on one node it is the loopback.
pub(super) fn open_mpi(v: &Vars) -> Result<LaunchEnv> {
    let hint = "Open MPI's mpirun sets it";
    let rank = v.number("OMPI_COMM_WORLD_RANK", hint)?;
    let world_size = v.number("OMPI_COMM_WORLD_SIZE", hint)?;
    let local_rank = v.number("OMPI_COMM_WORLD_LOCAL_RANK", hint)?;
    let local_world_size = v.optional_number("OMPI_COMM_WORLD_LOCAL_SIZE")?;
    let names = [
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_SIZE",
    ];
    mpi_env(
        v,
        Launcher::OpenMpi,
        names,
        rank,
        world_size,
        Some(local_rank),
        local_world_size,
        "mpirun -x MASTER_ADDR=$(hostname) -x MASTER_PORT=29500",
    )
}

/// MPICH-family process managers (Hydra `mpiexec`, Intel MPI, MVAPICH, `ibrun`) through PMI.
pub(super) fn pmi(v: &Vars) -> Result<LaunchEnv> {
    let hint = "the MPI process manager sets it";
    let rank = v.number("PMI_RANK", hint)?;
    let world_size = v.number("PMI_SIZE", hint)?;
    let local_rank =
        first_number(v, &["MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK", "PMI_LOCAL_RANK"])?;
    let local_world_size =
        first_number(v, &["MPI_LOCALNRANKS", "MV2_COMM_WORLD_LOCAL_SIZE", "PMI_LOCAL_SIZE"])?;
    let names = ["PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"];
    mpi_env(
        v,
        Launcher::Pmi,
        names,
        rank,
        world_size,
        local_rank,
        local_world_size,
        "mpiexec -genv MASTER_ADDR $(hostname) -genv MASTER_PORT 29500",
    )
}

fn first_number(v: &Vars, names: &[&str]) -> Result<Option<usize>> {
    for name in names {
        if let Some(n) = v.optional_number(name)? {
            return Ok(Some(n));
        }
    }
    Ok(None)
}

/// The part MPI launchers share: where the store is, and the rank checks (`names` are the
/// variables to blame). Without a local rank the process is treated as alone on its node
/// (local rank = rank), and MASTER_ADDR must then be given.
#[allow(clippy::too_many_arguments)]
fn mpi_env(
    v: &Vars,
    launcher: Launcher,
    names: [&str; 4],
    rank: usize,
    world_size: usize,
    local_rank: Option<usize>,
    local_world_size: Option<usize>,
    example: &str,
) -> Result<LaunchEnv> {
    let one_node = world_size == 1 || local_world_size == Some(world_size);
    let master_addr = match v.get("MASTER_ADDR") {
        Some(addr) => addr,
        None if one_node => "127.0.0.1".to_string(),
        None => {
            return Err(Error::DistEnv(format!(
                "MASTER_ADDR is not set and {launcher} does not say that all {world_size} ranks share one node: \
                 pass the address of rank 0's host, e.g. `{example} ...`"
            )))
        }
    };
    let master_port = v.port_or(Some(DEFAULT_MASTER_PORT))?;
    let restart_count = v.restart_count()?;
    let mut e = LaunchEnv::checked(
        launcher,
        [rank, world_size, local_rank.unwrap_or(rank), local_world_size.unwrap_or(world_size)],
        names,
        master_addr,
        master_port,
    )?;
    e.restart_count = restart_count;
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::super::detect::tests::layout;
    use super::*;

    #[test]
    fn mpirun_one_node_defaults_to_loopback() {
        let e = layout(&[
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "1"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(e.launcher, Launcher::OpenMpi);
        assert_eq!((e.rank, e.local_rank, e.world_size, e.local_world_size), (1, 1, 2, 2));
        assert_eq!((e.master_addr.as_str(), e.master_port), ("127.0.0.1", DEFAULT_MASTER_PORT));
    }

    #[test]
    fn mpirun_across_nodes_needs_master_addr() {
        let vars = [
            ("OMPI_COMM_WORLD_RANK", "2"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "0"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
        ];
        let err = layout(&vars).unwrap_err().to_string();
        assert!(err.contains("MASTER_ADDR") && err.contains("mpirun -x MASTER_ADDR"), "{err}");
        let e =
            layout(&[&vars[..], &[("MASTER_ADDR", "node1"), ("MASTER_PORT", "31000")]].concat())
                .unwrap()
                .unwrap();
        assert_eq!((e.master_addr.as_str(), e.master_port, e.local_rank), ("node1", 31000, 0));
    }

    #[test]
    fn pmi_layouts() {
        let e = layout(&[
            ("PMI_RANK", "1"),
            ("PMI_SIZE", "2"),
            ("MPI_LOCALRANKID", "1"),
            ("MPI_LOCALNRANKS", "2"),
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "1"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(e.launcher, Launcher::Pmi);
        assert_eq!(
            (e.rank, e.local_rank, e.world_size, e.master_addr.as_str()),
            (1, 1, 2, "127.0.0.1")
        );
        let e = layout(&[
            ("PMI_RANK", "5"),
            ("PMI_SIZE", "8"),
            ("MV2_COMM_WORLD_LOCAL_RANK", "1"),
            ("MV2_COMM_WORLD_LOCAL_SIZE", "4"),
            ("MASTER_ADDR", "c1"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!((e.local_rank, e.local_world_size, e.master_addr.as_str()), (1, 4, "c1"));
        let err = layout(&[("PMI_RANK", "0"), ("PMI_SIZE", "2")]).unwrap_err().to_string();
        assert!(err.contains("MASTER_ADDR") && err.contains("mpiexec"), "{err}");
        let err = layout(&[("PMI_RANK", "0")]).unwrap_err().to_string();
        assert!(err.contains("PMI_SIZE"), "{err}");
        let err = layout(&[("PMI_RANK", "0"), ("PMI_SIZE", "1"), ("MASTER_PORT", "0")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("MASTER_PORT=\"0\""), "{err}");
    }
}
