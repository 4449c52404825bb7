//! Launching the exported programs from a notebook: find (or build) an example binary, run it
//! under torchrun with its output streamed into the cell, and kill one worker on purpose to
//! watch fault tolerance at work.
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::{Error, Result};

/// The repository trainbook was built from (its examples and data scripts live there).
pub fn repo_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The compiled example `name` (newest of target/release and target/debug); builds it in
/// release mode first if neither exists.
pub fn example_binary(name: &str) -> Result<PathBuf> {
    let candidates =
        ["release", "debug"].map(|p| repo_dir().join("target").join(p).join("examples").join(name));
    let newest = candidates
        .iter()
        .filter(|p| p.exists())
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok());
    if let Some(p) = newest {
        return Ok(p.clone());
    }
    println!("building examples/{name}.rs (release) ...");
    let status = Command::new("cargo")
        .args(["build", "--release", "--example", name])
        .current_dir(repo_dir())
        .status()
        .map_err(|e| Error::io("cargo", e))?;
    if !status.success() {
        return Err(Error::InvalidArgument(format!("cargo build --example {name} failed")));
    }
    Ok(candidates[0].clone())
}

/// `torchrun --standalone --nproc-per-node=N [--max-restarts=R] --no-python PROGRAM ARGS...`,
/// using the project's venv (`TRAINBOOK_VENV`) when set.
pub fn torchrun(nproc: usize, max_restarts: u32, program: &Path, args: &[&str]) -> Command {
    let torchrun = std::env::var("TRAINBOOK_VENV")
        .map(|v| Path::new(&v).join("bin/torchrun"))
        .unwrap_or_else(|_| PathBuf::from("torchrun"));
    let mut cmd = Command::new(torchrun);
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
    pub fn spawn(mut cmd: Command) -> Result<Job> {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Error::io(format!("{cmd:?}"), e))?;
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
            if self.child.try_wait().map_err(|e| Error::io("launcher", e))?.is_some() {
                break;
            }
            if ready() {
                if let Some(pid) = self.worker_pid(rank) {
                    let ok = Command::new("kill")
                        .args(["-9", &pid.to_string()])
                        .status()
                        .map_err(|e| Error::io("kill", e))?;
                    if ok.success() {
                        println!(">>> killed rank {rank} (pid {pid}) with SIGKILL");
                        return Ok(pid);
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(Error::InvalidArgument(format!("rank {rank} could not be killed within {timeout:?} (job ended or condition never held)")))
    }

    /// Waits for the launcher to finish; returns its status and everything it printed.
    pub fn wait(mut self) -> Result<(ExitStatus, String)> {
        let status = self.child.wait().map_err(|e| Error::io("launcher", e))?;
        let text =
            self.echo.drain(..).map(|h| h.join().unwrap_or_default()).collect::<Vec<_>>().join("");
        Ok((status, text))
    }
}

/// Runs `cmd` to completion with its output streamed; an error if it fails.
pub fn run_streaming(cmd: Command) -> Result<String> {
    let (status, text) = Job::spawn(cmd)?.wait()?;
    if !status.success() {
        return Err(Error::InvalidArgument(format!("the job failed ({status})")));
    }
    Ok(text)
}
