//! Running a job's ranks. [`spawn`] runs a closure (a notebook's own code) as the ranks of a
//! c10d group, threads of the calling process or, under a launcher, the launcher's processes.
//! The rest launches programs (the exported notebooks, the examples) under torchrun, Ray or
//! Dask (and reads back what Ray and Dask jobs report), with
//! their output streamed as it comes (into a notebook cell, or a terminal), and kills one
//! worker on purpose to watch fault tolerance at work.
mod cluster;
mod launch_result;
pub mod protocol;
mod scripts;
mod spawn;

pub use cluster::{dask_launch, ray_launch, LaunchOptions};
pub use launch_result::{LaunchResult, RankOutcome};
pub use protocol::{EpochReport, RunReport};
pub use scripts::launchers_dir;
pub use spawn::{spawn, spawn_with, SpawnOptions};

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::programs::failed;
use crate::Result;

/// The file a student's workspace (`make workspace`, scripts/notebooks/workspace.py) has at its
/// top: JSON whose `checkout` names the class's shared checkout.
pub const WORKSPACE_FILE: &str = "trainbook-workspace.json";

/// The Cargo target directories where `example_binary` looks, from `start` up: `$CARGO_TARGET_DIR`
/// if set, `target/` beside the nearest `Cargo.toml`, and, inside a student's workspace (a folder
/// above `start` holding [`WORKSPACE_FILE`]), the `target/` of the checkout it names. A workspace
/// file that cannot be read or names no checkout is an error naming the file.
fn target_dirs(start: &Path) -> Result<Vec<PathBuf>> {
    let mut dirs: Vec<PathBuf> =
        std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).into_iter().collect();
    if let Some(project) = start.ancestors().find(|d| d.join("Cargo.toml").is_file()) {
        dirs.push(project.join("target"));
    }
    if let Some(ws) = start.ancestors().find(|d| d.join(WORKSPACE_FILE).is_file()) {
        dirs.push(workspace_checkout(&ws.join(WORKSPACE_FILE))?.join("target"));
    }
    Ok(dirs)
}

/// The checkout a workspace file names.
fn workspace_checkout(file: &Path) -> Result<PathBuf> {
    let text = std::fs::read_to_string(file).map_err(|e| failed(file, e.to_string()))?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| failed(file, format!("not a workspace file: {e}")))?;
    match value.get("checkout").and_then(|c| c.as_str()) {
        Some(checkout) if Path::new(checkout).is_absolute() => Ok(PathBuf::from(checkout)),
        _ => Err(failed(
            file,
            "names no checkout (an absolute path under \"checkout\"): make the workspace again \
             with `make workspace`",
        )),
    }
}

/// The compiled example `name` of the Cargo project the current directory belongs to (a
/// notebook's folder inside it counts): the newest of `target/release/examples/NAME` and
/// `target/debug/examples/NAME`. In a student's workspace (`make workspace`) it also looks in
/// the `target/` of the class's checkout the workspace names. trainbook does not build it: an
/// error says how.
///
/// ```no_run
/// let exe = trainbook::launch::example_binary("mnist")?;
/// let log = trainbook::launch::run_streaming(trainbook::launch::torchrun(2, 0, &exe, &[]))?;
/// # Ok::<(), trainbook::Error>(())
/// ```
pub fn example_binary(name: &str) -> Result<PathBuf> {
    example_binary_from(&std::env::current_dir().unwrap_or_default(), name)
}

/// [`example_binary`] looking up from `start` instead of the current directory.
fn example_binary_from(start: &Path, name: &str) -> Result<PathBuf> {
    let targets = target_dirs(start)?;
    let newest = targets
        .iter()
        .flat_map(|t| ["release", "debug"].map(|p| t.join(p).join("examples").join(name)))
        .filter(|p| p.is_file())
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok());
    newest.ok_or_else(|| {
        let looked: Vec<String> = targets.iter().map(|t| t.display().to_string()).collect();
        failed(
            format!("examples/{name}"),
            format!(
                "not built (looked in {{release,debug}}/examples under {}): run `cargo build \
                 --release --example {name}` in the project first",
                if looked.is_empty() {
                    "no Cargo project above the current directory".into()
                } else {
                    looked.join(", ")
                }
            ),
        )
    })
}

/// `torchrun --standalone --nproc-per-node=N [--max-restarts=R] --no-python PROGRAM ARGS...`,
/// with the torchrun [`crate::programs::torchrun`] finds.
pub fn torchrun(nproc: usize, max_restarts: u32, program: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(crate::programs::torchrun());
    cmd.args([
        "--standalone",
        &format!("--nproc-per-node={nproc}"),
        &format!("--max-restarts={max_restarts}"),
        "--no-python",
    ])
    .arg(program)
    .args(args);
    cmd
}

/// The pid of the child of `launcher` (torchrun's agent) whose environment has `RANK=rank`
/// (Linux: read from /proc).
pub fn worker_pid(launcher: u32, rank: usize) -> Option<u32> {
    let children =
        std::fs::read_to_string(format!("/proc/{launcher}/task/{launcher}/children")).ok()?;
    let needle = format!("RANK={rank}");
    children.split_whitespace().filter_map(|p| p.parse().ok()).find(|p: &u32| {
        std::fs::read(format!("/proc/{p}/environ"))
            .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()))
    })
}

/// A running launcher whose output is echoed line by line (so it appears in the cell as it comes).
pub struct Job {
    child: Child,
    echo: Vec<JoinHandle<String>>,
}

fn echo<R: Read + Send + 'static>(stream: R) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stream).lines().map_while(|l| l.ok()) {
            // torchrun's start-up banner about OMP_NUM_THREADS is noise in a notebook.
            if !line.contains("OMP_NUM_THREADS")
                && !line.starts_with("W1")
                && !line.contains("*****")
            {
                println!("{line}");
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    })
}

impl Job {
    /// Starts `cmd` with its stdout and stderr echoed line by line and its stdin empty
    /// (`/dev/null`): in a notebook this process's stdin is the kernel's command channel
    /// (evcxr sends the cells' run requests on it), which the job must never read.
    pub fn spawn(mut cmd: Command) -> Result<Job> {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| failed(cmd.get_program(), format!("could not be started: {e}")))?;
        let echo = vec![
            echo(child.stdout.take().expect("piped")),
            echo(child.stderr.take().expect("piped")),
        ];
        Ok(Job { child, echo })
    }

    /// The pid of the worker with `RANK=rank` among the launcher's children, if running.
    pub fn worker_pid(&self, rank: usize) -> Option<u32> {
        worker_pid(self.child.id(), rank)
    }

    /// Waits until `ready()` holds, then SIGKILLs the worker of `rank` (like a crashed GPU node).
    pub fn kill_rank_when(
        &mut self,
        rank: usize,
        timeout: Duration,
        ready: impl Fn() -> bool,
    ) -> Result<u32> {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if self.child.try_wait().map_err(|e| failed("launcher", e))?.is_some() {
                break;
            }
            if ready() {
                if let Some(pid) = self.worker_pid(rank) {
                    let ok = Command::new("kill")
                        .args(["-9", &pid.to_string()])
                        .status()
                        .map_err(|e| failed("kill", e))?;
                    if ok.success() {
                        println!(">>> killed rank {rank} (pid {pid}) with SIGKILL");
                        return Ok(pid);
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(failed(
            "launcher",
            format!(
                "rank {rank} could not be killed within {timeout:?} (the job ended, or the \
                 condition never held)"
            ),
        ))
    }

    /// Waits for the launcher to finish; returns its status and everything it printed.
    pub fn wait(mut self) -> Result<(ExitStatus, String)> {
        let status = self.child.wait().map_err(|e| failed("launcher", e))?;
        let text =
            self.echo.drain(..).map(|h| h.join().unwrap_or_default()).collect::<Vec<_>>().join("");
        Ok((status, text))
    }
}

/// Runs `cmd` to completion without showing its output, and returns what it printed on
/// stdout; an error, naming the program, its exit status and the last lines of its stderr, if
/// it fails (a notebook cell then stops with that message instead of checking a status).
///
/// ```no_run
/// # use trainbook::launch::{example_binary, run_captured, torchrun};
/// let exe = example_binary("mnist")?;
/// run_captured(torchrun(2, 0, &exe, &["--epochs", "1"]))?;
/// # Ok::<(), trainbook::Error>(())
/// ```
pub fn run_captured(mut cmd: Command) -> Result<String> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    let out = cmd.output().map_err(|e| failed(&program, format!("could not be started: {e}")))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = stderr.lines().collect();
        let tail = lines[lines.len().saturating_sub(10)..].join("\n");
        return Err(failed(
            &program,
            format!("failed ({}); the end of its stderr:\n{tail}", out.status),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `cmd` to completion with its output streamed (and its stdin empty, see
/// [`Job::spawn`]); an error if it fails.
pub fn run_streaming(cmd: Command) -> Result<String> {
    let (status, text) = Job::spawn(cmd)?.wait()?;
    if !status.success() {
        return Err(failed("the job", format!("failed ({status})")));
    }
    Ok(text)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Makes this process's stdin a pipe (as a notebook cell's is: evcxr's command channel)
    /// while `f` runs, then puts the old one back; one caller at a time.
    pub(crate) fn with_stdin_a_pipe<T>(f: impl FnOnce() -> T) -> T {
        static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let mut ends = [0; 2];
        // SAFETY: plain descriptor calls on descriptors this function owns; fd 0 is restored.
        unsafe {
            assert_eq!(libc::pipe(ends.as_mut_ptr()), 0);
            let saved = libc::dup(0);
            assert!(saved >= 0 && libc::dup2(ends[0], 0) == 0);
            libc::close(ends[1]); // a reader would see the end of the input, never block
            let out = f();
            libc::dup2(saved, 0);
            libc::close(saved);
            libc::close(ends[0]);
            out
        }
    }

    #[test]
    fn a_launched_job_never_reads_the_kernels_stdin() {
        let (status, text) = with_stdin_a_pipe(|| {
            let mut probe = Command::new("readlink");
            probe.arg("/proc/self/fd/0");
            Job::spawn(probe).and_then(Job::wait)
        })
        .unwrap();
        assert!(status.success());
        assert_eq!(text.trim(), "/dev/null", "the job's stdin");
        // The probe itself sees the pipe, so the check above can fail.
        let here = with_stdin_a_pipe(|| std::fs::read_link("/proc/self/fd/0").unwrap());
        assert!(here.to_string_lossy().starts_with("pipe:"), "{here:?}");
    }

    #[test]
    fn a_workspace_finds_the_examples_built_in_its_checkout() {
        let dir = tempfile::tempdir().unwrap();
        let checkout = dir.path().join("checkout");
        let built = checkout.join("target/release/examples");
        std::fs::create_dir_all(&built).unwrap();
        std::fs::write(built.join("mnist"), b"").unwrap();
        let notebooks = dir.path().join("ws/notebooks");
        std::fs::create_dir_all(&notebooks).unwrap();
        // Outside any workspace and project: not found, and the message says where it looked.
        let err = example_binary_from(&notebooks, "mnist").unwrap_err().to_string();
        assert!(err.contains("not built") && err.contains("examples/mnist"), "{err}");
        let file = dir.path().join("ws").join(WORKSPACE_FILE);
        let about = serde_json::json!({ "checkout": checkout.to_str().unwrap() });
        std::fs::write(&file, about.to_string()).unwrap();
        assert_eq!(example_binary_from(&notebooks, "mnist").unwrap(), built.join("mnist"));
        let err = example_binary_from(&notebooks, "dogs").unwrap_err().to_string();
        assert!(err.contains(&checkout.join("target").display().to_string()), "{err}");
        // A workspace file that names no checkout, or is not JSON: an error naming the file.
        for bad in ["{\"checkout\": \"relative/path\"}", "{}", "checkout = 1"] {
            std::fs::write(&file, bad).unwrap();
            let err = example_binary_from(&notebooks, "mnist").unwrap_err().to_string();
            assert!(err.contains(&file.display().to_string()), "{bad}: {err}");
        }
    }
}
