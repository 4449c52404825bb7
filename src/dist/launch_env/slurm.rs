//! Slurm's `srun`: one task per rank (SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID). Slurm does
//! not say where rank 0's TCPStore lives, so MASTER_ADDR defaults to the first host of the
//! step's node list (then SLURM_LAUNCH_NODE_IPADDR) and MASTER_PORT to 29500 + SLURM_JOB_ID %
//! 1000. Slurm's list syntaxes are read in `slurm_lists.rs`.
use super::layout::{LaunchEnv, Launcher, DEFAULT_MASTER_PORT};
use super::slurm_lists::{first_host, tasks_on_node};
use super::vars::Vars;
use crate::{Error, Result};

/// `srun`: one task per rank. Rank 0 runs on the first node of the step (block distribution),
/// so that node hosts the store; the launch node (where `srun` ran) may be a login node.
pub(super) fn srun(v: &Vars) -> Result<LaunchEnv> {
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
    let restart_count = v.restart_count()?;
    let mut e = LaunchEnv::checked(
        Launcher::Slurm,
        [rank, world_size, local_rank, local_world_size],
        ["SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "tasks on this node"],
        master_addr,
        master_port,
    )?;
    e.restart_count = restart_count;
    e.warnings = warnings;
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

#[cfg(test)]
mod tests {
    use super::super::detect::tests::layout;
    use super::*;

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
}
