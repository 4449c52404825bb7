//! The exporter itself (the `export` feature: it compiles `syn` and `prettyplease`): a
//! notebook's cells parsed and printed back as a Cargo project's `src/main.rs`, with its
//! `Cargo.toml` and `build.rs`.
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
         # Same optimisation and debug info as trainbook's own builds (libtorch does the heavy\n\
         # lifting; with full debug info of tch's bindings trainbook's test binaries were ~260 MB).\n\
         [profile.dev]\nopt-level = 1\ndebug = \"line-tables-only\"\n\n\
         [profile.dev.package.\"*\"]\nopt-level = 2\ndebug = false\n\n[workspace]\n",
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
