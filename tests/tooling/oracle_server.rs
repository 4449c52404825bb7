//! The oracle server (scripts/dev/oracle_server.py), which `make test` starts so that PyTorch's
//! side of the parity tests imports torch once instead of once per process: a script of
//! tests/oracle/ run through its client sees what it would see as a fresh Python, namely the
//! same thread count (with and without `OMP_NUM_THREADS`), CPU capability, default seed, bits of
//! a seeded matrix product, arguments, working directory, environment, stdin, `sys.path[0]` and
//! `__name__`, and its output, stderr and exit status reach the caller as a fresh process's do.
//! Anything else passes through the client to the venv's Python unchanged. A client killed at a
//! deadline takes its script down with it.
use crate::common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A server of this test's own, on a socket in `work`, stopped when dropped.
struct Server {
    child: Child,
    client: PathBuf,
}

impl Server {
    fn start(work: &Path) -> Server {
        let socket = work.join("socket");
        let python = common::venv().join("bin/python");
        let child = Command::new(&python)
            .arg(Path::new(ROOT).join("scripts/dev/oracle_server.py"))
            .arg("serve")
            .arg(&socket)
            .stdout(Stdio::null())
            .spawn()
            .expect("the oracle server starts");
        let start = Instant::now();
        while !socket.exists() {
            assert!(start.elapsed() < Duration::from_secs(120), "the oracle server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        // What run-tests.sh writes: the client, as a program the tests can start as "python".
        let client = work.join("python");
        std::fs::write(
            &client,
            format!(
                "#!/bin/bash\nexec '{py}' -I -S '{root}/scripts/dev/oracle_server.py' client '{py}' '{sock}' \"$@\"\n",
                py = python.display(),
                root = ROOT,
                sock = socket.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&client, std::fs::Permissions::from_mode(0o755)).unwrap();
        Server { child, client }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `PYTHON tests/oracle/process_state.py 3 a b` in `cwd` with `env`, "hello" on its stdin.
fn probe(python: &Path, cwd: &Path, env: &[(&str, Option<&str>)]) -> Output {
    let mut cmd = Command::new(python);
    cmd.arg(Path::new(ROOT).join("tests/oracle/process_state.py"))
        .args(["3", "a", "b"])
        .current_dir(cwd)
        .env_remove("OMP_NUM_THREADS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let mut child = cmd.spawn().unwrap();
    child.stdin.take().unwrap().write_all(b"hello\n").unwrap();
    common::wait_with_deadline(child, Duration::from_secs(300), "process_state.py")
}

#[test]
fn an_oracle_through_the_server_sees_what_a_fresh_python_sees() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("oracle-server");
    let server = Server::start(&work);
    let fresh = common::venv().join("bin/python");
    let mut seeds = Vec::new();
    for threads in [None, Some("1"), Some("2")] {
        let env = [("OMP_NUM_THREADS", threads), ("TRAINBOOK_PROBE", Some("probe value"))];
        let (a, b) = (probe(&fresh, &work, &env), probe(&server.client, &work, &env));
        let mut seen = Vec::new();
        for o in [&a, &b] {
            assert_eq!(o.status.code(), Some(3), "{}", common::text(o));
            let stderr = String::from_utf8_lossy(&o.stderr);
            assert_eq!(stderr.trim(), "to stderr", "{}", common::text(o));
            let mut state: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            // torch seeds its default generator from the system's entropy in every fresh
            // process: compared below as "a new seed in every process", not as equal.
            seeds.push(state["default_seed"].as_u64().unwrap());
            state.as_object_mut().unwrap().remove("default_seed");
            seen.push(state);
        }
        assert_eq!(seen[0]["stdin"], "hello", "{:?}", seen[0]);
        assert_eq!(seen[0]["probe"], "probe value", "{:?}", seen[0]);
        assert_eq!(
            seen[0], seen[1],
            "OMP_NUM_THREADS={threads:?}: a fresh Python (left) vs the server's child (right)"
        );
        println!("OMP_NUM_THREADS={threads:?}: {}", seen[0]);
    }
    let mut distinct = seeds.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), seeds.len(), "default seeds repeat between processes: {seeds:?}");
}

#[test]
fn the_client_hands_anything_else_to_python_and_a_killed_client_ends_its_script() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("oracle-server-pass");
    let server = Server::start(&work);
    // Not an oracle script: the venv's Python itself runs it (its executable says so).
    let o = Command::new(&server.client)
        .args(["-c", "import sys; print(sys.executable); sys.exit(4)"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", common::text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).trim().ends_with("/bin/python"),
        "{}",
        common::text(&o)
    );
    // An oracle waiting on its stdin (kept open), its client killed: the script ends too.
    let pidfile = work.join("pid");
    let mut child = Command::new(&server.client)
        .arg(Path::new(ROOT).join("tests/oracle/process_state.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .env("TRAINBOOK_PROBE_PIDFILE", &pidfile)
        .spawn()
        .unwrap();
    let start = Instant::now();
    let pid = loop {
        if let Some(pid) =
            std::fs::read_to_string(&pidfile).ok().and_then(|p| p.parse::<u32>().ok())
        {
            break pid;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "the oracle never started");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_ne!(pid, child.id(), "the script runs in the server's child, not in the client");
    child.kill().unwrap();
    let _ = child.wait();
    let start = Instant::now();
    while Path::new(&format!("/proc/{pid}")).exists() {
        assert!(start.elapsed() < Duration::from_secs(30), "the script outlived its killed client");
        std::thread::sleep(Duration::from_millis(50));
    }
}
