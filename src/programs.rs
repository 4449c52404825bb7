//! The external programs trainbook runs, and how it finds them: a Python interpreter (for the
//! data-preparation scripts, which need numpy and Pillow) and `torchrun`. Nothing here looks
//! inside trainbook's own source checkout, so the crate works the same as a dependency of any
//! project, from any directory.
//!
//! | what | first of |
//! |---|---|
//! | Python | `$TRAINBOOK_PYTHON`, `$TRAINBOOK_VENV/bin/python`, `$VIRTUAL_ENV/bin/python`, `python3` on `PATH` |
//! | torchrun | `$TRAINBOOK_TORCHRUN`, `torchrun` beside that Python, `torchrun` on `PATH` |
//!
//! Inside trainbook's checkout, `.cargo/config.toml` sets `TRAINBOOK_VENV` to the project's
//! venv for `cargo run`/`cargo test`; elsewhere activate a venv or set `TRAINBOOK_PYTHON`.
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// The Python interpreter trainbook runs its data scripts with (see the module's table).
///
/// ```
/// let python = trainbook::programs::python();
/// assert!(!python.as_os_str().is_empty());
/// ```
pub fn python() -> PathBuf {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let in_venv = |name: &str| var(name).map(|v| v.join("bin/python")).filter(|p| p.exists());
    var("TRAINBOOK_PYTHON")
        .or_else(|| in_venv("TRAINBOOK_VENV"))
        .or_else(|| in_venv("VIRTUAL_ENV"))
        .unwrap_or_else(|| PathBuf::from("python3"))
}

/// The `torchrun` launcher (see the module's table).
pub fn torchrun() -> PathBuf {
    if let Some(t) = std::env::var_os("TRAINBOOK_TORCHRUN").filter(|v| !v.is_empty()) {
        return PathBuf::from(t);
    }
    let python = python();
    match python.parent().map(|d| d.join("torchrun")) {
        Some(t) if t.exists() => t,
        _ => PathBuf::from("torchrun"),
    }
}

/// An [`Error::Process`] for `program`.
pub(crate) fn failed(program: impl AsRef<Path>, message: impl ToString) -> Error {
    Error::Process { program: program.as_ref().display().to_string(), message: message.to_string() }
}

/// Runs `cmd` to completion with its output going to this process's stdout/stderr and its
/// stdin empty (in a notebook this process's stdin is the kernel's command channel); an error
/// names the program and its exit status.
pub(crate) fn run(cmd: &mut std::process::Command, hint: &str) -> Result<()> {
    let program = PathBuf::from(cmd.get_program());
    let status = cmd
        .stdin(std::process::Stdio::null())
        .status()
        .map_err(|e| failed(&program, format!("could not be started: {e}. {hint}")))?;
    if status.success() {
        Ok(())
    } else {
        Err(failed(&program, format!("{status}. {hint}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::tests::with_stdin_a_pipe;

    #[test]
    fn a_helper_program_never_reads_the_kernels_stdin() {
        let mut probe = std::process::Command::new("sh");
        probe.args(["-c", r#"test "$(readlink /proc/self/fd/0)" = /dev/null"#]);
        with_stdin_a_pipe(|| run(&mut probe, "the probe")).expect("its stdin is /dev/null");
    }
}
