//! The rank layout under HPC launchers that do not speak torchrun's variables: Slurm's `srun`,
//! Open MPI's `mpirun`, and MPICH-family `mpiexec`/`ibrun` through PMI. They say who is who,
//! but not where rank 0's TCPStore lives, so MASTER_ADDR/MASTER_PORT come from the environment
//! when set, and otherwise from the documented defaults below.
//!
//! | launcher | rank / world / local rank                                 | MASTER_ADDR default                  | MASTER_PORT default          |
//! |----------|-----------------------------------------------------------|--------------------------------------|------------------------------|
//! | Slurm    | SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID                | first host of the step's node list, then SLURM_LAUNCH_NODE_IPADDR | 29500 + SLURM_JOB_ID % 1000 |
//! | Open MPI | OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK                 | 127.0.0.1 when all ranks share a node | 29500                       |
//! | PMI      | PMI_RANK / PMI_SIZE / MPI_LOCALRANKID (or MV2_…_LOCAL_RANK) | 127.0.0.1 when all ranks share a node | 29500                       |
use super::env::{LaunchEnv, Launcher};
use super::env_vars::{check_ranks, Vars};
use super::slurm_lists::{first_host, tasks_on_node};
use crate::{Error, Result};

/// torchrun's default port, used where the launcher gives no better choice.
pub const DEFAULT_MASTER_PORT: u16 = 29500;

/// `srun`: one task per rank. Rank 0 runs on the first node of the step (block distribution),
/// so that node hosts the store; the launch node (where `srun` ran) may be a login node.
pub(super) fn slurm(v: &Vars) -> Result<LaunchEnv> {
    let hint = "srun sets it";
    let rank = v.number("SLURM_PROCID", hint)?;
    let world_size = match v.optional_number("SLURM_NTASKS")? {
        Some(n) => n,
        None => {
            v.number("SLURM_STEP_NUM_TASKS", "srun sets SLURM_NTASKS or SLURM_STEP_NUM_TASKS")?
        }
    };
    let local_rank = v.number("SLURM_LOCALID", hint)?;
    let local_world_size = slurm_tasks_on_this_node(v)?.unwrap_or(world_size);
    let master_addr = match v.get("MASTER_ADDR") {
        Some(addr) => addr,
        None => ["SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"]
            .iter()
            .find_map(|name| v.get(name).and_then(|list| first_host(&list)))
            .or_else(|| v.get("SLURM_LAUNCH_NODE_IPADDR"))
            .ok_or_else(|| {
                Error::DistEnv("MASTER_ADDR is not set and neither is SLURM_JOB_NODELIST nor SLURM_LAUNCH_NODE_IPADDR".into())
            })?,
    };
    let job_port = v
        .optional_number("SLURM_JOB_ID")?
        .or(v.optional_number("SLURM_JOBID")?)
        .map(|id| DEFAULT_MASTER_PORT + (id % 1000) as u16);
    let master_port = v.port_or(Some(job_port.unwrap_or(DEFAULT_MASTER_PORT)))?;
    let mut warnings = Vec::new();
    if world_size > 1 && !v.has("SLURM_STEP_ID") && !v.has("SLURM_STEPID") {
        warnings.push(format!(
            "SLURM_NTASKS={world_size} but SLURM_STEP_ID is unset, so this process was probably not started by srun \
             (a batch script runs once): start the program with `srun`, or it will wait for {} peers that never come",
            world_size - 1
        ));
    }
    let e = LaunchEnv {
        launcher: Launcher::Slurm,
        rank,
        local_rank,
        world_size,
        local_world_size,
        master_addr,
        master_port,
        agent_store: false,
        restart_count: v.restart_count()?,
        warnings,
    };
    check_ranks(&e, ["SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "tasks on this node"])?;
    Ok(e)
}

/// This node's task count from SLURM_STEP_TASKS_PER_NODE (or SLURM_TASKS_PER_NODE), e.g.
/// `2(x3),1` with SLURM_NODEID=3 -> 1; or SLURM_NTASKS_PER_NODE.
fn slurm_tasks_on_this_node(v: &Vars) -> Result<Option<usize>> {
    let node = v.optional_number("SLURM_NODEID")?;
    for name in ["SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"] {
        if let (Some(spec), Some(node)) = (v.get(name), node) {
            return tasks_on_node(&spec, node).map(Some).ok_or_else(|| {
                Error::DistEnv(format!("{name}={spec:?} has no entry for SLURM_NODEID={node}"))
            });
        }
    }
    v.optional_number("SLURM_NTASKS_PER_NODE")
}

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
    let e = LaunchEnv {
        launcher,
        rank,
        local_rank: local_rank.unwrap_or(rank),
        world_size,
        local_world_size: local_world_size.unwrap_or(world_size),
        master_addr,
        master_port: v.port_or(Some(DEFAULT_MASTER_PORT))?,
        agent_store: false,
        restart_count: v.restart_count()?,
        warnings: Vec::new(),
    };
    check_ranks(&e, names)?;
    Ok(e)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn layout(pairs: &[(&str, &str)]) -> Result<Option<LaunchEnv>> {
        let vars: HashMap<String, String> =
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        LaunchEnv::from_map(&vars)
    }

    #[test]
    fn srun_two_nodes() {
        let e = layout(&[
            ("SLURM_PROCID", "3"),
            ("SLURM_LOCALID", "1"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_NODEID", "1"),
            ("SLURM_STEP_TASKS_PER_NODE", "2(x2)"),
            ("SLURM_JOB_NODELIST", "gpu[017-018]"),
            ("SLURM_LAUNCH_NODE_IPADDR", "10.1.0.1"),
            ("SLURM_JOB_ID", "123456"),
            ("SLURM_STEP_ID", "0"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(e.launcher, Launcher::Slurm);
        assert_eq!((e.rank, e.local_rank, e.world_size, e.local_world_size), (3, 1, 4, 2));
        assert_eq!((e.master_addr.as_str(), e.master_port), ("gpu017", 29500 + 456));
        assert!(!e.hosts_store() && e.warnings.is_empty());
    }

    #[test]
    fn srun_step_node_list_and_explicit_master() {
        let base = [
            ("SLURM_PROCID", "0"),
            ("SLURM_LOCALID", "0"),
            ("SLURM_NTASKS", "2"),
            ("SLURM_STEP_ID", "1"),
        ];
        let step =
            [&base[..], &[("SLURM_JOB_NODELIST", "n[1-8]"), ("SLURM_STEP_NODELIST", "n[5-6]")]]
                .concat();
        let e = layout(&step).unwrap().unwrap();
        assert_eq!((e.master_addr.as_str(), e.master_port, e.local_world_size), ("n5", 29500, 2));
        assert!(e.hosts_store());
        let given = [&step[..], &[("MASTER_ADDR", "head"), ("MASTER_PORT", "4000")]].concat();
        let e = layout(&given).unwrap().unwrap();
        assert_eq!((e.master_addr.as_str(), e.master_port), ("head", 4000));
        let launch_only = [&base[..], &[("SLURM_LAUNCH_NODE_IPADDR", "10.0.0.9")]].concat();
        assert_eq!(layout(&launch_only).unwrap().unwrap().master_addr, "10.0.0.9");
        let err = layout(&base).unwrap_err().to_string();
        assert!(err.contains("SLURM_JOB_NODELIST"), "{err}");
    }

    #[test]
    fn slurm_batch_script_is_warned_about() {
        let e = layout(&[
            ("SLURM_PROCID", "0"),
            ("SLURM_LOCALID", "0"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_JOB_NODELIST", "n1"),
        ])
        .unwrap()
        .unwrap();
        assert!(e.warnings.iter().any(|w| w.contains("srun")), "{:?}", e.warnings);
    }

    #[test]
    fn slurm_errors_name_the_variable() {
        for (vars, needle) in [
            (vec![("SLURM_PROCID", "0"), ("SLURM_LOCALID", "0")], "SLURM_STEP_NUM_TASKS"),
            (
                vec![("SLURM_PROCID", "0"), ("SLURM_NTASKS", "2"), ("SLURM_JOB_NODELIST", "n1")],
                "SLURM_LOCALID",
            ),
            (
                vec![
                    ("SLURM_PROCID", "2"),
                    ("SLURM_LOCALID", "0"),
                    ("SLURM_NTASKS", "2"),
                    ("SLURM_JOB_NODELIST", "n1"),
                ],
                "SLURM_PROCID=2",
            ),
            (
                vec![
                    ("SLURM_PROCID", "0"),
                    ("SLURM_LOCALID", "0"),
                    ("SLURM_NTASKS", "2"),
                    ("SLURM_JOB_NODELIST", "n1"),
                    ("SLURM_NODEID", "5"),
                    ("SLURM_TASKS_PER_NODE", "2"),
                ],
                "SLURM_NODEID=5",
            ),
        ] {
            let err = layout(&vars).unwrap_err().to_string();
            assert!(err.contains(needle), "{err:?} should mention {needle}");
        }
    }

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
