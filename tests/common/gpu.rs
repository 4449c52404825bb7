//! Helpers of the GPU suites (tests/gpu.rs, tests/gpu_ranks.rs): the GPU or a SKIPPED line,
//! and the PyTorch oracles they run. Both suites also run from the GPU bundle
//! (scripts/gpu/gpu-bundle.sh), on a machine without this checkout: there `TRAINBOOK_REPO` points
//! at the bundle's copy of `tests/oracle` and `TRAINBOOK_PYTHON` at a Python with torch.
use std::path::PathBuf;
use std::process::Command;

use tch::Device;

/// The GPU, or `None` after saying why the test is skipped.
pub fn gpu(test: &str) -> Option<Device> {
    if tch::Cuda::is_available() {
        Some(Device::Cuda(0))
    } else {
        super::skip(test, "no CUDA GPU on this machine (libtorch sees none)");
        None
    }
}

/// Where `tests/oracle` is: `TRAINBOOK_REPO`, else this checkout.
pub fn repo() -> PathBuf {
    std::env::var("TRAINBOOK_REPO")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

/// A Python with torch: `TRAINBOOK_PYTHON`, else the project's venv, else `python3`.
pub fn python() -> PathBuf {
    if let Ok(p) = std::env::var("TRAINBOOK_PYTHON") {
        return p.into();
    }
    let venv = repo().join(".venv/bin/python");
    if venv.exists() {
        venv
    } else {
        "python3".into()
    }
}

/// Runs `tests/oracle/SCRIPT ARGS` and returns its stdout (panics with its stderr on failure).
pub fn oracle(script: &str, args: &[&str]) -> String {
    let out = Command::new(python())
        .arg(repo().join("tests/oracle").join(script))
        .args(args)
        .output()
        .expect("python for the oracle (set TRAINBOOK_PYTHON)");
    assert!(out.status.success(), "{script} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}
