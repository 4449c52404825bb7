//! Free TCP ports for a group's store. The kernel's answer to "bind port 0" is only a guess that
//! the port stays free; two callers in one process (tests running side by side, two `spawn`s)
//! could be handed the same port and their ranks would then meet in one store. `free_port`
//! remembers every port it handed out in this process and never returns one twice.
use std::collections::BTreeSet;
use std::sync::Mutex;

use crate::{Error, Result};

static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// A TCP port that is free on every interface of this machine now and that no earlier call in
/// this process returned, for a store that is about to listen on it (`MASTER_PORT`).
///
/// ```
/// let a = trainbook::dist::free_port().unwrap();
/// let b = trainbook::dist::free_port().unwrap();
/// assert_ne!(a, b);
/// ```
pub fn free_port() -> Result<u16> {
    let fail = |message: String| Error::Dist { op: "find a free local port".into(), message };
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    // The kernel picks bind(0) ports at random in its ephemeral range, so a repeat is rare;
    // a few dozen tries make running out practically impossible.
    for _ in 0..64 {
        let listener =
            std::net::TcpListener::bind(("0.0.0.0", 0)).map_err(|e| fail(e.to_string()))?;
        let port = listener.local_addr().map_err(|e| fail(e.to_string()))?.port();
        if handed_out.insert(port) {
            return Ok(port);
        }
    }
    Err(fail(format!(
        "the kernel offered only ports already handed out ({} so far)",
        handed_out.len()
    )))
}

#[cfg(test)]
mod tests {
    #[test]
    fn never_the_same_port_twice_across_threads() {
        let ports: Vec<u16> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| (0..50).map(|_| super::free_port().unwrap()).collect::<Vec<_>>())
                })
                .collect();
            handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        let distinct: std::collections::BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len(), "a port was handed out twice");
    }
}
