//! The book (docs/, mdBook) holds together: every relative link of the README and the book leads
//! to a file that exists and, for a page, to one of its headings; every page is in SUMMARY.md and
//! compiled as doctests (src/lib.rs's `book` module), and `mdbook build` (installed by the set-up)
//! builds it without a warning, with a page per notebook (scripts/docs/notebook_pages.py) that
//! holds the notebook's code, plots and printed text.
use crate::common;
use crate::docs_claims::{documents, prose};

use std::path::{Component, Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The anchor mdBook and GitHub give a heading: its text without code ticks and link targets,
/// lowercased, letters, digits, `-` and `_` kept, spaces made `-`, anything else dropped.
fn anchor(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // `[words](target)` shows as `words`.
    while let Some(open) = rest.find('[') {
        let Some(mid) = rest[open..].find("](").map(|i| open + i) else { break };
        let Some(close) = rest[mid..].find(')').map(|i| mid + i) else { break };
        text.push_str(&rest[..open]);
        text.push_str(&rest[open + 1..mid]);
        rest = &rest[close + 1..];
    }
    text.push_str(rest);
    text.replace('`', "")
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a document's headings, a repeated one with `-1`, `-2`, ... as mdBook numbers it.
fn anchors(text: &str) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for line in prose(text).lines() {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            let base = anchor(line[hashes..].trim());
            let repeats =
                seen.iter().filter(|a| **a == base || a.starts_with(&format!("{base}-"))).count();
            seen.push(if repeats == 0 { base.clone() } else { format!("{base}-{repeats}") });
        }
    }
    seen
}

/// The targets of a document's Markdown links `[text](target)`, outside code.
fn link_targets(text: &str) -> Vec<String> {
    let outside_code: String = prose(text).split('`').step_by(2).collect::<Vec<_>>().join(" ");
    outside_code
        .match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &outside_code[at + 2..];
            rest.find(')').map(|end| rest[..end].trim().to_string())
        })
        .filter(|t| !t.contains("://") && !t.starts_with("mailto:"))
        .collect()
}

/// `path` with `.` and `..` taken out, without touching the disk.
fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[test]
fn every_relative_link_leads_to_a_file_and_a_heading() {
    let _turn = common::module_turn(module_path!());
    let mut checked = 0;
    for (doc, text) in documents() {
        let dir = Path::new(&doc).parent().unwrap_or(Path::new(""));
        for target in link_targets(&text) {
            let (file, fragment) = target.split_once('#').unwrap_or((&target, ""));
            let path = if file.is_empty() { PathBuf::from(&doc) } else { normal(&dir.join(file)) };
            let full = root().join(&path);
            assert!(full.exists(), "{doc} links to `{target}`: {} does not exist", path.display());
            if !fragment.is_empty() && path.extension().is_some_and(|e| e == "md") {
                let page = std::fs::read_to_string(&full).unwrap();
                let known = anchors(&page);
                assert!(
                    known.iter().any(|a| a == fragment),
                    "{doc} links to `{target}`: {} has no heading #{fragment} (its anchors: {known:?})",
                    path.display()
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 20, "only {checked} links found: did the documents' format change?");
}

#[test]
fn anchors_follow_mdbook_and_github() {
    let _turn = common::module_turn(module_path!());
    assert_eq!(anchor("RHEL / Rocky / HPC modules"), "rhel--rocky--hpc-modules");
    assert_eq!(
        anchor("`Ddp`: torch's DistributedDataParallel engine"),
        "ddp-torchs-distributeddataparallel-engine"
    );
    assert_eq!(anchor("The [first](x.md) cell"), "the-first-cell");
    assert_eq!(anchors("# A\n```\n# not a heading\n```\n## A\n"), ["a", "a-1"]);
}

#[test]
fn every_page_is_in_the_summary_and_compiled_as_doctests() {
    let _turn = common::module_turn(module_path!());
    let summary = std::fs::read_to_string(root().join("docs/src/SUMMARY.md")).unwrap();
    let lib = std::fs::read_to_string(root().join("src/lib.rs")).unwrap();
    let listed = link_targets(&summary);
    for (doc, _) in documents().into_iter().filter(|(d, _)| d.starts_with("docs/src/")) {
        let name = doc.trim_start_matches("docs/src/");
        if name == "SUMMARY.md" {
            continue;
        }
        assert!(listed.iter().any(|t| t == name), "docs/src/SUMMARY.md does not list {name}");
        let included = format!("include_str!(\"../docs/src/{name}\")");
        assert!(lib.contains(&included), "src/lib.rs's `book` module does not compile {doc}");
    }
}

#[test]
fn the_book_builds_without_a_warning() {
    let _turn = common::module_turn(module_path!());
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cargo"));
    let mdbook = cargo_home.join("bin/mdbook");
    assert!(
        mdbook.is_file(),
        "{} is not there: `make setup` (scripts/setup/setup.sh) installs it",
        mdbook.display()
    );
    let work = common::WorkDir::new("docs-book");
    let out = Command::new(&mdbook)
        .arg("build")
        .arg(root().join("docs"))
        .arg("--dest-dir")
        .arg(work.join("book"))
        .output()
        .expect("mdbook runs");
    let log =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "mdbook build docs failed:\n{log}");
    assert!(!log.contains("WARN") && !log.contains("ERROR"), "mdbook build docs warned:\n{log}");
    assert!(work.join("book/index.html").is_file(), "no index.html:\n{log}");
    notebook_pages_show_every_notebook_with_its_outputs(&work.join("book"));
}

/// The pages scripts/docs/notebook_pages.py adds (book/notebooks/NAME.html, one per notebook):
/// every code cell, every plot the notebook holds and every picture its text links to, inline
/// (data URIs), and the text its cells printed.
fn notebook_pages_show_every_notebook_with_its_outputs(book: &Path) {
    let mut pages = 0;
    for entry in std::fs::read_dir(root().join("notebooks")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "ipynb") {
            continue;
        }
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let nb: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let html = std::fs::read_to_string(book.join(format!("notebooks/{name}.html")))
            .unwrap_or_else(|e| panic!("no page for notebooks/{name}.ipynb: {e}"));
        let text = |v: &serde_json::Value| match v {
            serde_json::Value::Array(lines) => lines.iter().filter_map(|l| l.as_str()).collect(),
            other => other.as_str().unwrap_or_default().to_string(),
        };
        let (mut pictures, mut code_cells, mut printed) = (Vec::new(), 0, Vec::new());
        for cell in nb["cells"].as_array().unwrap() {
            let source = text(&cell["source"]);
            if cell["cell_type"] == "markdown" {
                for link in source.split("](figures/").skip(1) {
                    let file = link.split(')').next().unwrap();
                    let png = std::fs::read(root().join("notebooks/figures").join(file)).unwrap();
                    use base64::Engine;
                    pictures.push(base64::engine::general_purpose::STANDARD.encode(png));
                }
            } else if !source.trim().is_empty() {
                code_cells += 1;
            }
            for out in cell["outputs"].as_array().into_iter().flatten() {
                if let Some(png) = out["data"]["image/png"].as_str() {
                    pictures.push(png.split_whitespace().collect());
                }
                printed.extend(
                    text(&out["text"]).lines().filter(|l| l.len() > 20).map(str::to_string),
                );
            }
        }
        for png in &pictures {
            assert!(html.contains(&format!("data:image/png;base64,{png}")), "{name}: a picture");
        }
        // mdBook shows each picture once as it is and once enlarged: nothing else is inlined.
        let inlined: std::collections::BTreeSet<&str> = html
            .split("data:image/png;base64,")
            .skip(1)
            .map(|rest| rest.split('"').next().unwrap())
            .collect();
        assert_eq!(inlined.len(), pictures.len(), "{name}: pictures on the page");
        assert_eq!(html.matches("language-rust noplayground").count(), code_cells, "{name}");
        // Links into the book (`../docs/src/page.md` in the notebook) lead to the book's pages.
        assert!(!html.contains("href=\"../docs/src/"), "{name}: a link into docs/src");
        if nb.to_string().contains("](../docs/src/launching.md)") {
            assert!(html.contains("href=\"../launching.html\""), "{name}: the Launching page");
        }
        // The last long printed line, as mdBook escapes text (quotes are left as they are).
        if let Some(line) = printed.last() {
            let escaped = line.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
            assert!(html.contains(escaped.trim_end()), "{name}'s page lacks {line:?}");
        }
        pages += 1;
    }
    assert_eq!(pages, 7, "the course's seven notebooks");
}
