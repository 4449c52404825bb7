//! Reads the rank layout a launcher (torchrun) puts in the environment.
use std::collections::HashMap;

use crate::{Error, Result};

/// What torchrun tells each worker process about its place in the job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchEnv {
    pub rank: usize,
    pub local_rank: usize,
    pub world_size: usize,
    pub local_world_size: usize,
    pub master_addr: String,
    pub master_port: u16,
    /// `TORCHELASTIC_USE_AGENT_STORE=True`: torchrun's agent hosts the TCPStore and every
    /// rank (rank 0 included) connects to it as a client.
    pub agent_store: bool,
    /// `TORCHELASTIC_RESTART_COUNT`: how often torchrun restarted the worker group.
    pub restart_count: u32,
}

impl LaunchEnv {
    /// Reads the process environment; `Ok(None)` when no launcher set `WORLD_SIZE`/`RANK`.
    pub fn from_env() -> Result<Option<LaunchEnv>> {
        let vars: HashMap<String, String> = std::env::vars().collect();
        Self::from_map(&vars)
    }

    /// Same as [`from_env`](Self::from_env) over an explicit variable map (used by tests).
    pub fn from_map(vars: &HashMap<String, String>) -> Result<Option<LaunchEnv>> {
        let get = |name: &str| vars.get(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        if get("WORLD_SIZE").is_none() && get("RANK").is_none() {
            return Ok(None);
        }
        let number = |name: &str| -> Result<usize> {
            let raw = get(name).ok_or_else(|| Error::DistEnv(format!("{name} is not set (a launcher such as torchrun sets it)")))?;
            raw.parse().map_err(|_| Error::DistEnv(format!("{name}={raw:?} is not a non-negative integer")))
        };
        let rank = number("RANK")?;
        let world_size = number("WORLD_SIZE")?;
        if world_size == 0 || rank >= world_size {
            return Err(Error::DistEnv(format!("RANK={rank} must be below WORLD_SIZE={world_size}")));
        }
        let local_rank = if get("LOCAL_RANK").is_some() { number("LOCAL_RANK")? } else { rank };
        let local_world_size = if get("LOCAL_WORLD_SIZE").is_some() { number("LOCAL_WORLD_SIZE")? } else { world_size };
        let master_addr = get("MASTER_ADDR").ok_or_else(|| Error::DistEnv("MASTER_ADDR is not set".into()))?;
        let port_raw = get("MASTER_PORT").ok_or_else(|| Error::DistEnv("MASTER_PORT is not set".into()))?;
        let master_port = port_raw
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| Error::DistEnv(format!("MASTER_PORT={port_raw:?} is not a port number")))?;
        let agent_store = get("TORCHELASTIC_USE_AGENT_STORE").is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
        let restart_count = match get("TORCHELASTIC_RESTART_COUNT") {
            None => 0,
            Some(raw) => raw
                .parse()
                .map_err(|_| Error::DistEnv(format!("TORCHELASTIC_RESTART_COUNT={raw:?} is not an integer")))?,
        };
        Ok(Some(LaunchEnv { rank, local_rank, world_size, local_world_size, master_addr, master_port, agent_store, restart_count }))
    }

    /// A world of one on this machine (no launcher): rank 0 hosts a store on a free local port.
    pub fn single_process() -> Result<LaunchEnv> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| Error::DistEnv(format!("no free local port for a single-process store: {e}")))?
            .port();
        Ok(LaunchEnv {
            rank: 0,
            local_rank: 0,
            world_size: 1,
            local_world_size: 1,
            master_addr: "127.0.0.1".into(),
            master_port: port,
            agent_store: false,
            restart_count: 0,
        })
    }

    /// Whether this process hosts the TCPStore (rank 0, unless torchrun's agent hosts it).
    pub fn hosts_store(&self) -> bool {
        self.rank == 0 && !self.agent_store
    }

    /// Key prefix of this attempt: a restarted group never reads its predecessor's keys.
    pub fn store_prefix(&self) -> String {
        format!("trainbook/attempt_{}/", self.restart_count)
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
        assert_eq!(e.store_prefix(), "trainbook/attempt_1/");
    }

    #[test]
    fn rank_zero_hosts_without_agent() {
        let e = LaunchEnv::from_map(&env(&[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "1234")]))
            .unwrap()
            .unwrap();
        assert!(e.hosts_store());
        assert_eq!((e.local_rank, e.local_world_size, e.restart_count), (0, 2, 0));
    }

    #[test]
    fn bad_values_name_the_variable() {
        let cases = [
            (env(&[("RANK", "0")]), "WORLD_SIZE"),
            (env(&[("RANK", "3"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "h"), ("MASTER_PORT", "1")]), "RANK=3"),
            (env(&[("RANK", "x"), ("WORLD_SIZE", "2")]), "RANK=\"x\""),
            (env(&[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_PORT", "1")]), "MASTER_ADDR"),
            (env(&[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "h"), ("MASTER_PORT", "70000")]), "MASTER_PORT"),
        ];
        for (vars, needle) in cases {
            let err = LaunchEnv::from_map(&vars).unwrap_err().to_string();
            assert!(err.contains(needle), "{err:?} should mention {needle}");
        }
    }
}
