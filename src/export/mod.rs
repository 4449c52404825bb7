//! Exporting an evcxr notebook to a standalone Cargo project: `:dep` lines become
//! `[dependencies]`, items (fn, struct, use, impl, ...) go to the top level, statements go into
//! `main` in cell order, evcxr commands are dropped with a comment, cells starting with
//! `// notebook-only` are skipped, and a cell's final expression (what the notebook displays)
//! is shown with `notebook::show_any`, which saves pictures to files outside a notebook.
//!
//! The exporter (`export_notebook`, `write_project`, the `trainbook-export` binary) needs
//! the `export` feature, on by default; a notebook may leave it off (`:dep trainbook = { path =
//! "..", default-features = false }`) and skip compiling `syn` and `prettyplease`. What a
//! notebook or an exported program calls at run time ([`current_notebook`],
//! [`print_error_chain`]) is here with or without it, so an exported program builds whatever
//! features its `:dep` line asks for.
use std::path::{Path, PathBuf};

#[cfg(feature = "export")]
mod project;

#[cfg(feature = "export")]
pub use project::{export_notebook, write_project, ExportedProject};

/// The notebook this kernel is running, where Jupyter says: jupyter_server 2 (behind
/// JupyterLab 4 and Notebook 7) starts each kernel with `JPY_SESSION_NAME` set to the
/// notebook's path. `None` outside such a kernel (a plain program, the REPL, nbclient), so a
/// cell can export the notebook it is in:
///
/// ```no_run
/// # fn main() -> trainbook::Result<()> {
/// if let Some(notebook) = trainbook::export::current_notebook() {
///     let project = trainbook::export::export_notebook(&notebook)?;
///     println!("{} notes", project.notes.len());
/// }
/// # Ok(()) }
/// ```
pub fn current_notebook() -> Option<PathBuf> {
    let value = std::env::var_os("JPY_SESSION_NAME")?;
    notebook_path_from(Path::new(&value), &std::env::current_dir().ok()?)
}

/// `JPY_SESSION_NAME` as a path: absolute as jupyter_server writes it; a relative one (older
/// servers give the path under the server's root) is looked up from the kernel's directory,
/// whole or by its file name. `None` when it names no existing file.
fn notebook_path_from(value: &Path, cwd: &Path) -> Option<PathBuf> {
    if value.as_os_str().is_empty() {
        return None;
    }
    if value.is_absolute() {
        return value.is_file().then(|| value.to_path_buf());
    }
    [Some(cwd.join(value)), value.file_name().map(|name| cwd.join(name))]
        .into_iter()
        .flatten()
        .find(|p| p.is_file())
}

/// Prints `error` and its chain of causes on stderr, one per line (what an exported notebook
/// does when a cell's `?` fails).
pub fn print_error_chain(error: &dyn std::error::Error) {
    eprintln!("error: {error}");
    let mut cause = error.source();
    while let Some(c) = cause {
        eprintln!("  caused by: {c}");
        cause = c.source();
    }
}

#[cfg(test)]
mod tests {
    use super::notebook_path_from;
    use std::path::Path;

    #[test]
    fn the_session_name_is_resolved_to_an_existing_notebook() {
        let dir = tempfile::tempdir().unwrap();
        let nb = dir.path().join("course").join("02.ipynb");
        std::fs::create_dir_all(nb.parent().unwrap()).unwrap();
        std::fs::write(&nb, "{}").unwrap();
        let course = nb.parent().unwrap();
        assert_eq!(notebook_path_from(&nb, Path::new("/")), Some(nb.clone()));
        assert_eq!(notebook_path_from(Path::new("course/02.ipynb"), dir.path()), Some(nb.clone()));
        assert_eq!(notebook_path_from(Path::new("course/02.ipynb"), course), Some(nb.clone()));
        assert_eq!(notebook_path_from(Path::new("gone.ipynb"), course), None);
        assert_eq!(notebook_path_from(Path::new(""), course), None);
    }
}
