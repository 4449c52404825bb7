//! The notebooks are committed with their outputs (`make notebooks`), so a reader on a code
//! host sees the plots and figures. This fast check (no kernel) fails when a committed notebook
//! has a code cell that was not executed, a cell edited since its outputs were produced (each
//! executed cell records the CRC-32 of its source), an error output, or a course notebook with
//! fewer than two pictures.
use crate::common;

use std::path::Path;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(lines) => lines.iter().filter_map(|l| l.as_str()).collect(),
        _ => String::new(),
    }
}

/// Problems with one committed notebook, and its number of inline PNG pictures.
fn check(path: &Path) -> (Vec<String>, usize) {
    let nb: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let (mut problems, mut pngs) = (Vec::new(), 0);
    let cells = nb["cells"].as_array().unwrap();
    for (i, cell) in cells.iter().enumerate().filter(|(_, c)| c["cell_type"] == "code") {
        let source = text(&cell["source"]);
        let first = source.lines().next().unwrap_or("").to_string();
        if cell["execution_count"].is_null() {
            problems.push(format!("cell {i} ({first}) has not been executed"));
            continue;
        }
        let crc = format!("{:08x}", crc32fast::hash(source.as_bytes()));
        let recorded = cell["metadata"]["trainbook"]["source_crc32"].as_str().unwrap_or("none");
        if recorded != crc {
            problems.push(format!(
                "cell {i} ({first}) was edited after its outputs were produced \
                 (source CRC {crc}, outputs made from {recorded})"
            ));
        }
        for out in cell["outputs"].as_array().into_iter().flatten() {
            if out["output_type"] == "error" {
                problems.push(format!("cell {i} ({first}) has an error output: {}", out["evalue"]));
            }
            if out["output_type"] == "stream" && out["name"] == "stderr" {
                let t = text(&out["text"]);
                if t.contains("error[E") || t.contains("panicked at") {
                    problems.push(format!("cell {i} ({first}) printed an error: {t}"));
                }
            }
            if let Some(b64) = out["data"]["image/png"].as_str() {
                use base64::Engine;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(b64.replace('\n', ""))
                    .unwrap();
                let img = image::load_from_memory(&bytes).unwrap();
                assert!(img.width() >= 300 && img.height() >= 150, "{}: cell {i}", path.display());
                pngs += 1;
            }
        }
    }
    (problems, pngs)
}

#[test]
fn committed_notebooks_carry_current_outputs() {
    let _turn = common::module_turn(module_path!());
    let mut names: Vec<_> = std::fs::read_dir(Path::new(ROOT).join("notebooks"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "ipynb"))
        .collect();
    names.sort();
    assert!(names.len() >= 5, "{names:?}");
    let mut all = Vec::new();
    for path in &names {
        let (problems, pngs) = check(path);
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let course = !name.starts_with("00-");
        if course && pngs < 2 {
            all.push(format!("{name}: {pngs} picture(s) in the committed outputs, expected 2+"));
        }
        all.extend(problems.into_iter().map(|p| format!("{name}: {p}")));
    }
    assert!(
        all.is_empty(),
        "run `make notebooks` to refresh the committed outputs:\n{}",
        all.join("\n")
    );
}

/// A line of code as an excerpt compares it: without its trailing `// comment` and its indent.
fn code_line(line: &str) -> &str {
    let line = match line.find(" //") {
        Some(at) if !line.trim_start().starts_with("//") => &line[..at],
        _ => line,
    };
    line.trim()
}

/// The markdown cells show parts of the examples as fenced excerpts whose first line is
/// `// examples/NAME.rs, shortened`: unlike a cell that prints the file, an excerpt cannot go
/// stale by surprise, because every line of it must be a line of that file, in the file's order
/// (lines left out between them; the excerpt's own trailing comments do not count).
#[test]
fn excerpts_of_the_examples_match_the_files() {
    let _turn = common::module_turn(module_path!());
    let mut checked = 0;
    for entry in std::fs::read_dir(Path::new(ROOT).join("notebooks")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "ipynb") {
            continue;
        }
        let nb: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for cell in nb["cells"].as_array().unwrap().iter().filter(|c| c["cell_type"] == "markdown")
        {
            let source = text(&cell["source"]);
            for block in source.split("```rust\n").skip(1) {
                let block = block.split("```").next().unwrap();
                let mut lines = block.lines();
                let Some(file) = lines
                    .next()
                    .and_then(|l| l.strip_prefix("// "))
                    .and_then(|l| l.strip_suffix(", shortened"))
                else {
                    continue;
                };
                let example = std::fs::read_to_string(Path::new(ROOT).join(file))
                    .unwrap_or_else(|e| panic!("{}: an excerpt of {file}: {e}", path.display()));
                let mut rest = example.lines().map(code_line);
                for line in lines.map(code_line).filter(|l| !l.is_empty()) {
                    assert!(
                        rest.any(|l| l == line),
                        "{}: the excerpt of {file} shows `{line}`, which is not in the file \
                         (or not in this order): update the excerpt",
                        path.display()
                    );
                }
                checked += 1;
            }
        }
    }
    // Notebook 04's `examples/designsafe.rs` and 05's `examples/tiny_imagenet.rs`.
    assert!(checked >= 2, "{checked} excerpts found");
}
