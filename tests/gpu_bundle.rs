//! The GPU bundle never rots: `scripts/gpu/gpu-bundle.sh --dev` builds it from this checkout (the
//! set-up's torch, the dev profile; the GPU suite with the `cuda` feature where that libtorch
//! has CUDA, as tests/cuda_feature.rs builds it, the other binaries as the test build makes
//! them, so nothing is compiled twice), and its
//! `run.sh` runs to the end here with the project's Python: every binary starts with
//! `LD_LIBRARY_PATH` as run.sh sets it; without a GPU every check is SKIPPED, the exit status
//! is 0 and report.json says so check by check. On a machine with a GPU no check may fail.
//! A second test, ignored by `make test` (`make gpu-bundle-cpu` runs it: minutes of training on 2
//! cores), runs run.sh with `TRAINBOOK_BUNDLE_DEVICE=cpu`, which runs the examples' checks on
//! the CPU: the invocations the GPU run makes (flags, data paths, the shipped MNIST, two
//! torchrun processes) work. (`make gpu-bundle` builds the release bundle against torch 2.11
//! for the GPU machines.)
mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{wait_with_deadline, WorkDir};

/// Generous: the examples, the GPU suites and the bench built on 2 busy cores.
const BUILD_LIMIT: Duration = Duration::from_secs(2400);

/// Runs `cmd` with stdout and stderr in files (cargo's output can exceed a pipe's buffer),
/// returns (success, stdout + stderr).
fn run_logged(cmd: &mut Command, dir: &Path, name: &str, limit: Duration) -> (bool, String) {
    let (out, err) = (dir.join(format!("{name}.out")), dir.join(format!("{name}.err")));
    let child = cmd
        .stdout(Stdio::from(std::fs::File::create(&out).unwrap()))
        .stderr(Stdio::from(std::fs::File::create(&err).unwrap()))
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
    let status = wait_with_deadline(child, limit, name).status;
    let text = format!(
        "stdout:\n{}\nstderr:\n{}",
        std::fs::read_to_string(&out).unwrap_or_default(),
        std::fs::read_to_string(&err).unwrap_or_default()
    );
    (status.success(), text)
}

/// Builds the dev bundle into `work/bundle` (scripts/gpu/gpu-bundle.sh --dev) and checks that it
/// holds every file run.sh needs; returns its folder.
fn build_dev_bundle(work: &Path) -> std::path::PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bundle = work.join("bundle");
    let mut build = Command::new("bash");
    build.arg(root.join("scripts/gpu/gpu-bundle.sh")).arg("--dev").arg(&bundle);
    common::without_cargo_run_env(&mut build);
    let (built, log) = run_logged(&mut build, work, "build", BUILD_LIMIT);
    assert!(built, "scripts/gpu/gpu-bundle.sh --dev failed\n{log}");
    for exe in ["gpu", "gpu_ranks", "gpu-bench", "mnist", "designsafe", "tiny_imagenet", "dogs"] {
        assert!(bundle.join("bin").join(exe).is_file(), "bin/{exe} missing from the bundle");
    }
    for file in [
        "run.sh",
        "MANIFEST.json",
        "benches/pytorch_gpu.py",
        "benches/trace_summary.py",
        "scripts/bench/bench_records.py",
        "tests/oracle/amp.py",
        "data-scripts/designsafe_standin.py",
    ] {
        assert!(bundle.join(file).is_file(), "{file} missing from the bundle");
    }
    assert!(bundle.join("data/mnist/t10k-labels-idx1-ubyte.gz").is_file(), "MNIST missing");
    bundle
}

#[test]
fn the_gpu_bundle_builds_and_its_run_sh_runs_to_the_end() {
    let work = WorkDir::new("gpu-bundle");
    let bundle = build_dev_bundle(&work);

    // run.sh as on a compute node: nothing of this checkout's environment but the Python.
    let (json, text) = run_sh(&bundle, &work, "report", &[]);
    let checks = json["checks"].as_array().expect("checks").clone();
    let names: Vec<&str> = checks.iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(names, CHECKS, "report.json's checks");
    if tch::Cuda::is_available() {
        assert!(checks.iter().all(|c| c["status"] == "passed"), "{checks:?}");
        assert!(json["bench"]["resnet34_step"].is_array(), "{}", json["bench"]);
        return;
    }
    for c in &checks {
        assert_eq!(c["status"], "skipped", "without a GPU every check is skipped: {c}");
    }
    assert!(json["gpu"].is_null());
    assert!(json["bench"]["skipped"].is_string(), "gpu.json says why: {}", json["bench"]);
    // The test binaries themselves ran and said why they skipped.
    for needle in
        ["SKIPPED cuda_train_steps_match_pytorch", "SKIPPED ddp_on_one_gpu", "SKIPPED gpu bench"]
    {
        assert!(text.contains(needle), "report.txt lacks {needle:?}\n{text}");
    }

    // A machine lent by the minute: the checks asked for, in the order asked.
    let (json, _) = run_sh(&bundle, &work, "report-some", &[("CHECKS", "bench gpu-suite")]);
    let names: Vec<&str> =
        json["checks"].as_array().unwrap().iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(names, ["bench", "gpu-suite"], "TRAINBOOK_BUNDLE_CHECKS picks and orders");
    // Out of time: no check starts, report.json still says which, and the exit status is 1.
    let (ran, json, _) = run_sh_status(&bundle, &work, "report-late", &[("DEADLINE", "0")]);
    assert!(!ran, "a run whose checks did not run exits 1");
    let not_run: Vec<&str> =
        json["not_run"].as_array().unwrap().iter().filter_map(|c| c.as_str()).collect();
    assert_eq!(not_run, ["gpu-suite", "gpu-ranks", "bench"], "{json}");
    // A name that is not a check is refused before anything runs, naming it.
    let (ran, log) = run_logged(
        Command::new("bash")
            .arg(bundle.join("run.sh"))
            .arg(work.join("report-typo"))
            .arg(common::venv_bin("python"))
            .env("TRAINBOOK_BUNDLE_CHECKS", "bench gpu"),
        &work,
        "report-typo",
        Duration::from_secs(120),
    );
    assert!(!ran && log.contains("names 'gpu', which is not a check"), "{log}");
}

/// The examples' invocations of run.sh, run on the CPU (`TRAINBOOK_BUNDLE_DEVICE=cpu`): their
/// flags and data paths work as written. Minutes of training on 2 cores, so not in `make test`:
/// `make gpu-bundle-cpu` runs it.
#[test]
#[ignore = "long tier (make test-long, make gpu-bundle-cpu): the bundle's examples on the CPU"]
fn long_the_bundles_examples_run_on_the_cpu_as_they_would_on_the_gpu() {
    let work = WorkDir::new("gpu-bundle-cpu");
    let bundle = build_dev_bundle(&work);
    let (json, _) = run_sh(&bundle, &work, "report-cpu", &[("DEVICE", "cpu")]);
    for c in json["checks"].as_array().expect("checks") {
        let on_cpu = !matches!(c["name"].as_str(), Some("gpu-suite" | "gpu-ranks" | "bench"));
        let want = if on_cpu { "passed" } else { "skipped" };
        assert_eq!(c["status"], want, "with TRAINBOOK_BUNDLE_DEVICE=cpu: {c}");
    }
    // The DesignSafe run's profile, summarised: its recorded steps with the loop's phases.
    let steps = json["profile"].as_array().expect("report.json's profile").clone();
    let names: Vec<&str> = steps.iter().filter_map(|s| s["step"].as_str()).collect();
    assert_eq!(names.first(), Some(&"ProfilerStep#2"), "{names:?}");
    assert!(steps.iter().all(|s| s["phases_ms"]["forward"].as_f64() > Some(0.0)), "{steps:?}");
}

/// The checks run.sh reports, in order.
const CHECKS: [&str; 8] = [
    "gpu-suite",
    "gpu-ranks",
    "mnist",
    "mnist-torchrun-2",
    "designsafe",
    "tiny_imagenet",
    "dogs",
    "bench",
];

/// Runs `bundle/run.sh work/report` with the project's Python and only what a compute node
/// would have (no cargo or checkout variables), with `TRAINBOOK_BUNDLE_{NAME}` set for each
/// (NAME, value) of `vars`; asserts it exits 0 with no failed check and returns report.json and
/// report.txt.
fn run_sh(
    bundle: &Path,
    work: &Path,
    report: &str,
    vars: &[(&str, &str)],
) -> (serde_json::Value, String) {
    let (ran, json, log) = run_sh_status(bundle, work, report, vars);
    assert_eq!(json["failed"], serde_json::json!([]), "failed checks\n{log}");
    assert!(ran, "run.sh exited non-zero\n{log}");
    let text = std::fs::read_to_string(work.join(report).join("report.txt")).expect("report.txt");
    (json, text)
}

/// As `run_sh`, asserting nothing: whether run.sh exited 0, report.json, and run.sh's output.
fn run_sh_status(
    bundle: &Path,
    work: &Path,
    report: &str,
    vars: &[(&str, &str)],
) -> (bool, serde_json::Value, String) {
    let report = work.join(report);
    let mut run = Command::new("bash");
    run.arg(bundle.join("run.sh")).arg(&report).arg(common::venv_bin("python"));
    for var in ["TRAINBOOK_VENV", "LIBTORCH", "LD_LIBRARY_PATH", "TRAINBOOK_PYTHON"] {
        run.env_remove(var);
    }
    for var in ["DEVICE", "CHECKS", "DEADLINE"] {
        run.env_remove(format!("TRAINBOOK_BUNDLE_{var}"));
    }
    for (name, value) in vars {
        run.env(format!("TRAINBOOK_BUNDLE_{name}"), value);
    }
    let name = report.file_name().unwrap().to_string_lossy().to_string();
    let (ran, log) = run_logged(&mut run, work, &name, Duration::from_secs(900));
    let json: serde_json::Value = serde_json::from_slice(
        &std::fs::read(report.join("report.json")).expect("run.sh wrote report.json"),
    )
    .unwrap();
    (ran, json, log)
}
