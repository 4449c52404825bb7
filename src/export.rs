//! Exporting an evcxr notebook to a standalone Cargo project: `:dep` lines become
//! `[dependencies]`, items (fn, struct, use, impl, ...) go to the top level, statements go into
//! `main` in cell order, evcxr commands are dropped with a comment, cells starting with
//! `// notebook-only` are skipped, and a cell's final expression (what the notebook displays)
//! is shown with `notebook::show_any`, which saves pictures to files outside a notebook.
use std::path::{Path, PathBuf};

use crate::{Error, Result, WithPath};

/// The generated project's pieces.
#[derive(Debug, Default)]
pub struct ExportedProject {
    /// The Cargo package name (from the notebook's file name).
    pub name: String,
    /// `name = spec` lines for `[dependencies]`.
    pub dependencies: Vec<String>,
    /// The generated `src/main.rs`.
    pub main_rs: String,
    /// What was dropped or changed, per cell (printed by `trainbook-export`).
    pub notes: Vec<String>,
}

fn cell_source(cell: &serde_json::Value) -> String {
    match &cell["source"] {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(lines) => lines.iter().filter_map(|l| l.as_str()).collect(),
        _ => String::new(),
    }
}

/// Makes a `path = "..."` in a `:dep` spec absolute (relative to the notebook's directory).
fn absolutize_path(spec: &str, notebook_dir: &Path) -> String {
    let Some(start) = spec.find("path") else { return spec.to_string() };
    let rest = &spec[start..];
    let (Some(q1), Some(len)) =
        (rest.find('"'), rest.find('"').and_then(|q| rest[q + 1..].find('"')))
    else {
        return spec.to_string();
    };
    let rel = &rest[q1 + 1..q1 + 1 + len];
    let abs =
        std::fs::canonicalize(notebook_dir.join(rel)).unwrap_or_else(|_| notebook_dir.join(rel));
    format!("{}{}\"{}\"{}", &spec[..start], &rest[..q1], abs.display(), &rest[q1 + 2 + len..])
}

/// Translates the notebook at `path` (an .ipynb file).
pub fn export_notebook(path: &Path) -> Result<ExportedProject> {
    let text = std::fs::read_to_string(path).with_path(path)?;
    let nb: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| Error::parse(path, "notebook (.ipynb JSON)", e))?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("notebook");
    let name: String = stem
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
        .collect();
    let name =
        if name.starts_with(|c: char| c.is_ascii_digit()) { format!("nb-{name}") } else { name };
    let mut project = ExportedProject { name, ..Default::default() };
    let (mut items, mut stmts): (Vec<syn::Item>, Vec<syn::Stmt>) = (Vec::new(), Vec::new());
    let cells = nb["cells"]
        .as_array()
        .ok_or_else(|| Error::InvalidArgument(format!("{}: no cells", path.display())))?;
    for (index, cell) in cells.iter().enumerate().filter(|(_, c)| c["cell_type"] == "code") {
        let source = cell_source(cell);
        if source.trim_start().starts_with("// notebook-only") {
            project.notes.push(format!("cell {index}: notebook-only, skipped"));
            continue;
        }
        let mut code = String::new();
        for line in source.lines() {
            let t = line.trim_start();
            if let Some(dep) = t.strip_prefix(":dep ") {
                project.dependencies.push(absolutize_path(dep.trim(), &dir));
            } else if t.starts_with(':') {
                project.notes.push(format!("cell {index}: evcxr command dropped: {t}"));
            } else {
                code.push_str(line);
                code.push('\n');
            }
        }
        if code.trim().is_empty() {
            continue;
        }
        let block: syn::Block = syn::parse_str(&format!("{{\n{code}\n}}")).map_err(|e| {
            Error::parse(path, "Rust notebook", format!("cell {index} does not parse: {e}"))
        })?;
        let count = block.stmts.len();
        for (k, stmt) in block.stmts.into_iter().enumerate() {
            match stmt {
                syn::Stmt::Item(item) => items.push(item),
                syn::Stmt::Expr(expr, None) if k + 1 == count => {
                    let label = format!("cell-{index}");
                    stmts.push(syn::parse_quote!(trainbook::notebook::show_any(&(#expr), #label);));
                }
                other => stmts.push(other),
            }
        }
    }
    // Cells may use `?` (as in evcxr): the statements run in a function returning a Result,
    // and `main` prints the error with its chain of causes.
    let body: syn::ItemFn = syn::parse_quote!(
        fn notebook_main() -> Result<(), Box<dyn std::error::Error>> {
            #(#stmts)*
            Ok(())
        }
    );
    let main: syn::ItemFn = syn::parse_quote!(
        fn main() -> std::process::ExitCode {
            match notebook_main() {
                Ok(()) => std::process::ExitCode::SUCCESS,
                Err(e) => {
                    trainbook::export::print_error_chain(e.as_ref());
                    std::process::ExitCode::FAILURE
                }
            }
        }
    );
    items.push(syn::Item::Fn(body));
    items.push(syn::Item::Fn(main));
    let file = syn::File { shebang: None, attrs: vec![], items };
    let header = format!(
        "// Exported from {} by trainbook-export.\n",
        path.file_name().and_then(|s| s.to_str()).unwrap_or("a notebook")
    );
    let notes: String = project.notes.iter().map(|n| format!("// {n}\n")).collect();
    project.main_rs = format!("{header}{notes}{}", prettyplease::unparse(&file));
    Ok(project)
}

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

/// Writes the project to `out` (Cargo.toml, src/main.rs; `lock`, if given, as Cargo.lock so
/// that the same dependency versions are used). Returns the manifest path.
pub fn write_project(
    project: &ExportedProject,
    out: &Path,
    lock: Option<&Path>,
) -> Result<PathBuf> {
    std::fs::create_dir_all(out.join("src")).with_path(out)?;
    let deps: String = project.dependencies.iter().map(|d| format!("{d}\n")).collect();
    let manifest = format!(
        "[package]\nname = \"{}\"\nversion = \"0.1.0\"\nedition = \"2021\"\npublish = false\n\n[dependencies]\n{deps}\n\
         # Same optimisation as trainbook's own builds (libtorch does the heavy lifting).\n[profile.dev]\nopt-level = 1\n\n[profile.dev.package.\"*\"]\nopt-level = 2\n\n[workspace]\n",
        project.name
    );
    let toml = out.join("Cargo.toml");
    std::fs::write(&toml, manifest).with_path(&toml)?;
    // Binaries find libtorch at run time through an rpath, like trainbook's own (link
    // arguments of a dependency's build script do not reach this package's binaries).
    // Fallback: the libtorch trainbook itself was linked with.
    let fallback = env!("TRAINBOOK_LIBTORCH_LIB");
    let build = format!(
        "fn main() {{\n    println!(\"cargo:rerun-if-env-changed=LIBTORCH\");\n    let lib = std::env::var(\"LIBTORCH\").map(|d| format!(\"{{d}}/lib\")).unwrap_or_else(|_| {fallback:?}.to_string());\n    println!(\"cargo:rustc-link-arg=-Wl,-rpath,{{lib}}\");\n}}\n"
    );
    std::fs::write(out.join("build.rs"), build).with_path(out)?;
    let main = out.join("src/main.rs");
    std::fs::write(&main, &project.main_rs).with_path(&main)?;
    if let Some(lock) = lock {
        std::fs::copy(lock, out.join("Cargo.lock")).with_path(lock)?;
    }
    Ok(toml)
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
