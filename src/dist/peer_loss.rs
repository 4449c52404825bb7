//! What a rank says when it stops on an error: one line, with its place in the job. When the
//! error is a broken connection to another rank (that rank exited or was killed, and Gloo or
//! NCCL reports "Connection reset by peer" in the middle of a collective), the line says so and
//! what the launcher does next, instead of Gloo's message alone; never a backtrace (evcxr sets
//! `RUST_BACKTRACE=1` for the programs a notebook starts, and `anyhow` would print one).
use super::{LaunchEnv, Launcher};
use crate::Error;

/// What c10d's transports say when the other end of a connection went away.
const PEER_GONE: [&str; 6] = [
    "Connection reset by peer",
    "Connection closed by peer",
    "Broken pipe",
    "Connection refused",
    "remote process exited",
    "Socket closed",
];

/// Whether `error` is a c10d operation that failed because another rank's connection broke
/// (the peer exited or was killed), as opposed to a time-out or a bad argument.
///
/// ```
/// use trainbook::dist::peer_lost;
/// let gone = trainbook::Error::Dist {
///     op: "allreduce (DDP backward)".into(),
///     message: "[pair.cc:537] Read error [127.0.0.1]:14027: Connection reset by peer.".into(),
/// };
/// assert!(peer_lost(&gone));
/// assert!(!peer_lost(&trainbook::Error::InvalidArgument("lr must be positive".into())));
/// ```
pub fn peer_lost(error: &Error) -> bool {
    match error {
        Error::Dist { message, .. } | Error::Kernel { message, .. } => {
            PEER_GONE.iter().any(|p| message.contains(p))
        }
        Error::Torch(e) => PEER_GONE.iter().any(|p| e.to_string().contains(p)),
        Error::Rank { source, .. } => peer_lost(source),
        _ => false,
    }
}

/// What the launcher does once a rank has failed.
fn launcher_next(launcher: Launcher) -> Option<&'static str> {
    Some(match launcher {
        Launcher::Torchrun => {
            "torchrun restarts every rank, to resume from the newest checkpoint, if \
             --max-restarts leaves a restart, and otherwise ends the job"
        }
        Launcher::Ray | Launcher::Dask => {
            "the launcher starts the ranks again, to resume from the newest checkpoint, if \
             --max-failures leaves a retry, and otherwise reports the failure"
        }
        Launcher::Slurm => "srun ends the job step",
        Launcher::OpenMpi | Launcher::Pmi => "mpirun ends the job",
        Launcher::Env | Launcher::Threads => return None,
    })
}

/// `text` on one line: runs of whitespace, line breaks included, made one space.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The one line a rank prints when it stops on `error`, given the launcher's environment
/// (`LaunchEnv::from_env()`, `None` for a process on its own): which rank of how many, what
/// happened and, for another rank's broken connection, what the launcher does next.
///
/// ```
/// use std::collections::HashMap;
/// use trainbook::dist::{failure_line, LaunchEnv};
/// let vars: HashMap<String, String> = [
///     ("RANK", "0"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "0"), ("LOCAL_WORLD_SIZE", "2"),
///     ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29500"), ("TORCHELASTIC_RUN_ID", "x"),
/// ].into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
/// let env = LaunchEnv::from_map(&vars)?.unwrap();
/// let gone = trainbook::Error::Dist {
///     op: "allreduce (DDP backward)".into(),
///     message: "Read error [127.0.0.1]:14027: Connection reset by peer. Check the logs.".into(),
/// };
/// let line = failure_line(&gone, Some(&env));
/// assert!(line.starts_with("rank 0 of 2 stopped: the connection to another rank broke during \
///     allreduce (DDP backward) (Connection reset by peer): that rank exited or was killed; \
///     torchrun restarts every rank"));
/// # Ok::<(), trainbook::Error>(())
/// ```
pub fn failure_line(error: &Error, env: Option<&LaunchEnv>) -> String {
    let who = env
        .map_or("stopped".to_string(), |e| format!("rank {} of {} stopped", e.rank, e.world_size));
    let gone = match error {
        Error::Rank { source, .. } => source,
        other => other,
    };
    if !peer_lost(gone) {
        return one_line(&format!("{who}: {error}"));
    }
    let during = match gone {
        Error::Dist { op, .. } | Error::Kernel { op, .. } => format!(" during {op}"),
        _ => String::new(),
    };
    let text = gone.to_string();
    let cause = PEER_GONE.iter().find(|p| text.contains(*p)).copied().unwrap_or("connection lost");
    let next = env.and_then(|e| launcher_next(e.launcher));
    one_line(&format!(
        "{who}: the connection to another rank broke{during} ({cause}): that rank exited or was \
         killed{}",
        next.map_or(String::new(), |n| format!("; {n}"))
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_errors_are_one_line_with_the_rank() {
        let e = Error::InvalidArgument("first line\n  second line".into());
        assert_eq!(failure_line(&e, None), "stopped: invalid argument: first line second line");
        let timeout = Error::Dist { op: "barrier".into(), message: "Socket Timeout".into() };
        assert!(!peer_lost(&timeout), "a time-out is not a lost peer");
        let nccl = Error::Dist {
            op: "allreduce".into(),
            message: "NCCL error: remote process exited or there was a network error".into(),
        };
        assert!(peer_lost(&nccl));
        let ranked = Error::Rank { rank: 1, world: 2, source: Box::new(nccl) };
        assert!(peer_lost(&ranked));
        let line = failure_line(&ranked, None);
        assert!(line.starts_with("stopped: the connection to another rank broke during allreduce"));
        assert!(line.ends_with("that rank exited or was killed"), "no launcher, no advice: {line}");
    }
}
