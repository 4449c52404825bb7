//! torchrun's variables, RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE and
//! MASTER_ADDR/MASTER_PORT: what torchrun sets, what trainbook's Ray and Dask launchers set
//! (naming themselves in TRAINBOOK_LAUNCHER), and what anyone can set by hand.
use super::layout::{LaunchEnv, Launcher};
use super::vars::Vars;
use crate::{Error, Result};

/// torchrun's variables (also what trainbook's Ray and Dask launchers set).
pub(super) fn from_rank_vars(v: &Vars) -> Result<LaunchEnv> {
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
    let restart_count = v.restart_count()?;
    let mut e = LaunchEnv::checked(
        launcher,
        [rank, world_size, local_rank, local_world_size],
        ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"],
        master_addr,
        master_port,
    )?;
    e.agent_store = agent_store;
    e.restart_count = restart_count;
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::super::detect::tests::env;
    use super::*;

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
