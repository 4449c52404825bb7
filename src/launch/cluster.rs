//! Ray and Dask from Rust: the commands that start a program as ranks under trainbook's
//! launchers (launchers/ray_launch.py, launchers/dask_launch.py) and the result those
//! launchers hand back (`--result-json`), the counterpart of Ray Train's `Result` and of the
//! futures of `dask_pytorch_ddp.dispatch.run`. The scripts themselves are bundled
//! ([`launchers_dir`](super::launchers_dir)).
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;

use super::protocol::{EpochReport, RunReport};
use crate::programs::failed;
use crate::train::EpochRecord;
use crate::{Error, Result, WithPath};

fn launcher(
    script: &str,
    options: &[String],
    result_json: &Path,
    program: &Path,
    args: &[&str],
) -> Result<Command> {
    let path = super::scripts::ready_launchers_dir()?.join(script);
    if !path.is_file() {
        return Err(failed(
            format!("launchers/{script}"),
            format!(
                "not found at {} (TRAINBOOK_LAUNCHERS names a folder without it; unset, the \
                 bundled scripts are used)",
                path.display()
            ),
        ));
    }
    let mut cmd = Command::new(crate::programs::python());
    cmd.arg(path)
        .args(options)
        .arg("--result-json")
        .arg(result_json)
        .arg("--")
        .arg(program)
        .args(args);
    Ok(cmd)
}

/// `python launchers/ray_launch.py --num-workers N --num-cpus C --result-json RESULT -- PROGRAM
/// ARGS...`: the program as `workers` ranks on a local Ray with `cpus` CPUs (one per worker
/// is reserved), its result written to `result_json` (read it with [`LaunchResult::read`]).
/// `extra` holds further launcher options (`--address auto`, `--use-gpu`, `--max-failures 2`).
/// Errors: [`Error::Process`] when the launcher script is not found, [`Error::Io`] when the
/// bundled scripts cannot be written (see [`launchers_dir`](super::launchers_dir)).
///
/// ```no_run
/// # fn main() -> trainbook::Result<()> {
/// use std::path::Path;
/// use trainbook::launch::{example_binary, ray_launch, run_streaming, LaunchResult};
/// let exe = example_binary("tiny_imagenet")?;
/// let result = Path::new("runs/ray-result.json");
/// run_streaming(ray_launch(2, 2, &[], result, &exe, &["--small-data", "--epochs", "1"])?)?;
/// println!("{:?}", LaunchResult::read(result)?.metrics);
/// # Ok(()) }
/// ```
pub fn ray_launch(
    workers: usize,
    cpus: usize,
    extra: &[&str],
    result_json: &Path,
    program: &Path,
    args: &[&str],
) -> Result<Command> {
    let mut options = vec![
        "--num-workers".to_string(),
        workers.to_string(),
        "--num-cpus".into(),
        cpus.to_string(),
    ];
    options.extend(extra.iter().map(|s| s.to_string()));
    launcher("ray_launch.py", &options, result_json, program, args)
}

/// `python launchers/dask_launch.py --local-workers N --num-workers N --result-json RESULT --
/// PROGRAM ARGS...`: the program as `workers` ranks, one per worker of a local Dask cluster
/// (`extra` options such as `--scheduler tcp://head:8786` replace the local cluster's), its
/// result written to `result_json`.
pub fn dask_launch(
    workers: usize,
    extra: &[&str],
    result_json: &Path,
    program: &Path,
    args: &[&str],
) -> Result<Command> {
    let mut options = vec!["--num-workers".to_string(), workers.to_string()];
    if !extra.contains(&"--scheduler") {
        options.extend(["--local-workers".to_string(), workers.to_string()]);
    }
    options.extend(extra.iter().map(|s| s.to_string()));
    launcher("dask_launch.py", &options, result_json, program, args)
}

/// What one rank of a launch returned (for Dask, its future's value).
#[derive(Clone, Debug, Deserialize)]
pub struct RankOutcome {
    /// Exit status (`None`: its worker died before it reported).
    pub status: Option<i32>,
    /// The last lines of its output.
    pub tail: String,
    /// One report per epoch it finished.
    pub reports: Vec<EpochReport>,
    /// Its final report, if it got that far.
    pub result: Option<RunReport>,
}

/// The result a launcher wrote with `--result-json` (launchers/launch_results.py's `Result`).
#[derive(Clone, Debug, Deserialize)]
pub struct LaunchResult {
    /// Rank 0's last epoch report.
    pub metrics: Option<EpochReport>,
    /// Rank 0's report of every epoch, in order.
    pub metrics_history: Vec<EpochReport>,
    /// The newest step checkpoint.
    pub checkpoint: Option<PathBuf>,
    /// The best-accuracy checkpoint.
    pub best_checkpoint: Option<PathBuf>,
    /// The run's output folder.
    pub path: Option<PathBuf>,
    /// Why the job failed, `None` on success.
    pub error: Option<String>,
    /// The launcher's exit status.
    pub returncode: i32,
    /// Times the group was started.
    pub attempts: u32,
    /// Every rank's outcome (index = rank).
    pub ranks: Vec<RankOutcome>,
}

impl LaunchResult {
    /// Reads a `--result-json` file. Errors: [`Error::Io`] naming a missing file,
    /// [`Error::Parse`] for one that is not a launcher's result.
    pub fn read(path: impl AsRef<Path>) -> Result<LaunchResult> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).with_path(path)?;
        serde_json::from_str(&text).map_err(|e| Error::parse(path, "launcher result (JSON)", e))
    }
    /// The epochs' records, ready for [`loss_accuracy_curves`](crate::figures::loss_accuracy_curves).
    pub fn history(&self) -> Vec<EpochRecord> {
        self.metrics_history.iter().map(|r| r.record.clone()).collect()
    }
}
