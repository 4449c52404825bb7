//! Ray and Dask from Rust: the commands that start a program as ranks under trainbook's
//! launchers (launchers/ray_launch.py, launchers/dask_launch.py), set by one
//! [`LaunchOptions`] (Ray Train's `ScalingConfig` and `FailureConfig`, dask-pytorch-ddp's
//! `dispatch.run` arguments). What the jobs hand back is read with
//! [`LaunchResult`](super::LaunchResult); the scripts themselves are bundled
//! ([`launchers_dir`](super::launchers_dir)).
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::programs::failed;
use crate::{Error, Result};

/// How a launcher starts a program's ranks: how many, on which cluster, with GPUs or not, how
/// many restarts, and where the result goes. One value for [`ray_launch`] and [`dask_launch`];
/// an option only one of them has is refused by the other, by name.
///
/// | here | Ray (`ray_launch.py`) | Dask (`dask_launch.py`) |
/// | --- | --- | --- |
/// | [`new(workers)`](Self::new) | `--num-workers` (`ScalingConfig(num_workers)`) | `--num-workers`, and `--local-workers` without a scheduler |
/// | [`address`](Self::address) | `--address` (a running Ray: `auto`, `ray://head:10001`) | `--scheduler` (`tcp://head:8786`) |
/// | [`cpus`](Self::cpus) | `--num-cpus` of the local Ray started without an address | refused |
/// | [`use_gpu`](Self::use_gpu) | `--use-gpu` (`ScalingConfig(use_gpu=True)`) | `--resources GPU=1` (one GPU worker per rank) |
/// | [`max_failures`](Self::max_failures) | `--max-failures` (`FailureConfig(max_failures)`) | `--max-failures` |
/// | [`result_json`](Self::result_json) | `--result-json` | `--result-json` |
/// | [`arg`](Self::arg) | any other option (`--cpus-per-worker 4`) | any other option (`--wait-for-workers 60`) |
///
/// ```no_run
/// # fn main() -> trainbook::Result<()> {
/// use std::path::Path;
/// use trainbook::launch::{example_binary, ray_launch, run_streaming, LaunchOptions, LaunchResult};
/// let exe = example_binary("tiny_imagenet")?;
/// let result = Path::new("runs/ray-result.json");
/// // Two ranks on a local Ray with 2 CPUs, the job's result written to `result`.
/// let ranks = LaunchOptions::new(2).cpus(2).result_json(result);
/// run_streaming(ray_launch(&ranks, &exe, &["--small-data", "--epochs", "1"])?)?;
/// println!("{:?}", LaunchResult::read(result)?.metrics);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchOptions {
    workers: usize,
    address: Option<String>,
    cpus: Option<usize>,
    use_gpu: bool,
    max_failures: u32,
    result_json: Option<PathBuf>,
    extra: Vec<String>,
}

impl LaunchOptions {
    /// `workers` ranks (at least 1), on a local cluster the launcher starts and stops, no GPU,
    /// no restart, no result file.
    pub fn new(workers: usize) -> LaunchOptions {
        LaunchOptions {
            workers,
            address: None,
            cpus: None,
            use_gpu: false,
            max_failures: 0,
            result_json: None,
            extra: Vec::new(),
        }
    }
    /// A running cluster to join instead of a local one: Ray's address (`auto`,
    /// `ray://head:10001`) or Dask's scheduler (`tcp://head:8786`).
    pub fn address(mut self, address: impl Into<String>) -> Self {
        self.address = Some(address.into());
        self
    }
    /// The CPUs of the local Ray started when no address is given (one per worker is
    /// reserved for its rank). Ray only.
    pub fn cpus(mut self, cpus: usize) -> Self {
        self.cpus = Some(cpus);
        self
    }
    /// One GPU per rank (Ray's `use_gpu=True`; on Dask, a worker with a `GPU` resource).
    pub fn use_gpu(mut self, on: bool) -> Self {
        self.use_gpu = on;
        self
    }
    /// Restarts of the whole group after a rank fails (Ray Train's
    /// `FailureConfig(max_failures)`); the program resumes from its newest checkpoint.
    pub fn max_failures(mut self, n: u32) -> Self {
        self.max_failures = n;
        self
    }
    /// Where the launcher writes the job's result (read it with
    /// [`LaunchResult::read`](super::LaunchResult::read)).
    pub fn result_json(mut self, path: impl AsRef<Path>) -> Self {
        self.result_json = Some(path.as_ref().to_path_buf());
        self
    }
    /// Another launcher option, passed as it is (`.arg("--cpus-per-worker").arg("4")`).
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.extra.push(arg.into());
        self
    }

    /// The launcher's options before `--`, for `launcher` (`"ray"` or `"dask"`).
    fn options(&self, launcher: &str) -> Result<Vec<String>> {
        let refuse = |what: &str| {
            Err(Error::InvalidArgument(format!(
                "LaunchOptions: {what} is not an option of {launcher}_launch"
            )))
        };
        if self.workers == 0 {
            return Err(Error::InvalidArgument(
                "LaunchOptions: workers must be at least 1, got 0".into(),
            ));
        }
        let mut options = vec!["--num-workers".to_string(), self.workers.to_string()];
        match (launcher, &self.address) {
            ("ray", Some(address)) => options.extend(["--address".into(), address.clone()]),
            ("dask", Some(scheduler)) => options.extend(["--scheduler".into(), scheduler.clone()]),
            ("dask", None) => options.extend(["--local-workers".into(), self.workers.to_string()]),
            _ => {}
        }
        match (launcher, self.cpus) {
            ("ray", Some(cpus)) => options.extend(["--num-cpus".into(), cpus.to_string()]),
            (_, Some(_)) => return refuse("cpus (the local Ray's --num-cpus)"),
            _ => {}
        }
        if self.use_gpu {
            match launcher {
                "ray" => options.push("--use-gpu".into()),
                _ => options.extend(["--resources".into(), "GPU=1".into()]),
            }
        }
        if self.max_failures > 0 {
            options.extend(["--max-failures".into(), self.max_failures.to_string()]);
        }
        if let Some(path) = &self.result_json {
            options.extend(["--result-json".into(), path.display().to_string()]);
        }
        options.extend(self.extra.iter().cloned());
        Ok(options)
    }
}

fn launcher(script: &str, options: Vec<String>, program: &Path, args: &[&str]) -> Result<Command> {
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
    cmd.arg(path).args(options).arg("--").arg(program).args(args);
    Ok(cmd)
}

/// `python launchers/ray_launch.py --num-workers N [OPTIONS] -- PROGRAM ARGS...`: the program as
/// the ranks `ranks` asks for, on a local Ray (started with [`LaunchOptions::cpus`] CPUs and
/// stopped at the end) or the cluster at [`LaunchOptions::address`]; see [`LaunchOptions`] for
/// an example. Errors: [`Error::InvalidArgument`] for 0 workers,
/// [`Error::Process`] when the launcher script is not found, [`Error::Io`] when the bundled
/// scripts cannot be written (see [`launchers_dir`](super::launchers_dir)).
pub fn ray_launch(ranks: &LaunchOptions, program: &Path, args: &[&str]) -> Result<Command> {
    launcher("ray_launch.py", ranks.options("ray")?, program, args)
}

/// `python launchers/dask_launch.py --num-workers N --local-workers N [OPTIONS] -- PROGRAM
/// ARGS...`: the program as the ranks `ranks` asks for, one per worker of a local Dask cluster
/// (or of the scheduler at [`LaunchOptions::address`], without `--local-workers`). Errors: as
/// [`ray_launch`], and [`Error::InvalidArgument`] for [`LaunchOptions::cpus`], which is Ray's.
///
/// ```no_run
/// # fn main() -> trainbook::Result<()> {
/// use trainbook::launch::{dask_launch, example_binary, run_streaming, LaunchOptions};
/// let exe = example_binary("dogs")?;
/// let ranks = LaunchOptions::new(2).result_json("runs/dask-result.json");
/// run_streaming(dask_launch(&ranks, &exe, &["--small-data"])?)?;
/// # Ok(()) }
/// ```
pub fn dask_launch(ranks: &LaunchOptions, program: &Path, args: &[&str]) -> Result<Command> {
    launcher("dask_launch.py", ranks.options("dask")?, program, args)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(cmd: &Command) -> Vec<String> {
        // The launcher script's path first, then its options.
        cmd.get_args().skip(1).map(|a| a.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn each_launcher_gets_its_own_flags() {
        let exe = Path::new("/bin/prog");
        let ray = ray_launch(&LaunchOptions::new(2).cpus(2).result_json("r.json"), exe, &["-x"]);
        assert_eq!(
            line(&ray.unwrap()),
            [
                "--num-workers",
                "2",
                "--num-cpus",
                "2",
                "--result-json",
                "r.json",
                "--",
                "/bin/prog",
                "-x"
            ]
        );
        let cluster = LaunchOptions::new(8).address("auto").use_gpu(true).max_failures(2);
        let ray = ray_launch(&cluster.clone().arg("--cpus-per-worker").arg("8"), exe, &[]);
        assert_eq!(
            line(&ray.unwrap()),
            [
                "--num-workers",
                "8",
                "--address",
                "auto",
                "--use-gpu",
                "--max-failures",
                "2",
                "--cpus-per-worker",
                "8",
                "--",
                "/bin/prog"
            ]
        );
        let dask = dask_launch(&LaunchOptions::new(2), exe, &[]).unwrap();
        assert_eq!(line(&dask), ["--num-workers", "2", "--local-workers", "2", "--", "/bin/prog"]);
        let dask = dask_launch(&cluster.address("tcp://head:8786"), exe, &[]).unwrap();
        assert_eq!(
            line(&dask),
            [
                "--num-workers",
                "8",
                "--scheduler",
                "tcp://head:8786",
                "--resources",
                "GPU=1",
                "--max-failures",
                "2",
                "--",
                "/bin/prog"
            ]
        );
    }

    #[test]
    fn an_option_the_launcher_lacks_and_no_workers_are_refused_by_name() {
        let exe = Path::new("/bin/prog");
        let err = dask_launch(&LaunchOptions::new(2).cpus(4), exe, &[]).unwrap_err().to_string();
        assert!(err.contains("cpus") && err.contains("dask_launch"), "{err}");
        let err = ray_launch(&LaunchOptions::new(0), exe, &[]).unwrap_err().to_string();
        assert!(err.contains("workers must be at least 1"), "{err}");
    }
}
