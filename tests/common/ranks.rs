//! Multi-process tests whose ranks are the test binary itself: `spawn_ranks` starts it `world`
//! times with `--ignored --exact MODULE::rank_worker` (the calling module's `rank_worker` test,
//! by its libtest name: see [`super::test_name`]) and the scenario in `TB_SCENARIO`, one thread
//! per rank and a 30 s collective timeout, so that every rank (and every single-process
//! reference started the same way) runs the same kernels.
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The arguments and environment of a rank (or a one-process reference) of `scenario`: the
/// `rank_worker` test of `module`, the caller's `module_path!()`.
pub fn worker_args(cmd: &mut Command, module: &str, scenario: &str, out: &Path) {
    let worker = super::test_name(module, "rank_worker");
    cmd.args(["--ignored", "--exact", &worker, "--nocapture", "--test-threads=1"])
        .env("TB_SCENARIO", scenario)
        .env("TB_OUT", out)
        .env("OMP_NUM_THREADS", "1")
        .env("TRAINBOOK_DIST_TIMEOUT", "30");
}

/// Runs `scenario` on `world` ranks started directly (rank 0 hosts the store): `module`'s
/// `rank_worker` (`module` is the caller's `module_path!()`).
pub fn spawn_ranks(module: &str, scenario: &str, world: usize, out: &Path) -> Vec<Child> {
    let port = super::free_port();
    (0..world)
        .map(|rank| {
            let mut cmd = Command::new(std::env::current_exe().unwrap());
            worker_args(&mut cmd, module, scenario, out);
            cmd.env("RANK", rank.to_string())
                .env("LOCAL_RANK", rank.to_string())
                .env("WORLD_SIZE", world.to_string())
                .env("LOCAL_WORLD_SIZE", world.to_string())
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", port.to_string())
                .env_remove("TORCHELASTIC_USE_AGENT_STORE")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect()
}

/// Runs `scenario` on `world` ranks (`module`'s `rank_worker`, `module` being the caller's
/// `module_path!()`) and asserts that all succeed; returns their stdout.
pub fn run_ranks(module: &str, scenario: &str, world: usize, out: &Path) -> String {
    let mut stdout = String::new();
    for (rank, child) in spawn_ranks(module, scenario, world, out).into_iter().enumerate() {
        let o = super::wait_with_deadline(
            child,
            Duration::from_secs(300),
            &format!("{scenario} rank {rank}"),
        );
        assert!(o.status.success(), "{scenario} rank {rank} failed\n{}", super::text(&o));
        stdout.push_str(&String::from_utf8_lossy(&o.stdout));
    }
    stdout
}

/// Waits for a line containing `needle` on `reader`; panics with what was read otherwise.
pub fn wait_for_line(reader: &mut impl std::io::BufRead, needle: &str, limit: Duration) -> String {
    let start = std::time::Instant::now();
    let mut seen = String::new();
    let mut line = String::new();
    while start.elapsed() < limit {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        seen.push_str(&line);
        if line.contains(needle) {
            return line;
        }
    }
    panic!("no line with {needle:?} within {limit:?}; output so far:\n{seen}");
}

/// Runs the ignored test `child` of the calling test binary as 2 processes under torchrun
/// (`trainbook::launch::torchrun`), with `envs` set, and fails with both outputs unless the job
/// succeeds. `child` is the test's libtest name, as `--exact` wants it: a test of a themed
/// binary's module is `module::name` ([`super::test_name`]).
pub fn torchrun_child(child: &str, envs: &[(&str, std::ffi::OsString)]) {
    let exe = std::env::current_exe().unwrap();
    let mut cmd =
        trainbook::launch::torchrun(2, 0, &exe, &["--ignored", "--exact", child, "--nocapture"]);
    cmd.envs(envs.iter().map(|(k, v)| (k, v)));
    let output = cmd.output().expect("torchrun starts");
    assert!(
        output.status.success(),
        "torchrun {child} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
