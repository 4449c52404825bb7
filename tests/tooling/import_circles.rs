//! The import-circle gate of `make lint` (`scripts/dev/import_circles.py --check` with
//! `scripts/dev/import_circles.baseline`):
//! - the tree passes it: no folder circle, no more file circles than the baseline;
//! - a planted folder circle (a `torch_file` file importing from `models`, which imports from
//!   `torch_file`) fails it, naming the two folders and the import that closes the circle;
//! - a planted file circle inside one folder (`models/resnet_blocks` importing from
//!   `models/resnet`, which imports from it) fails it as one file circle above the baseline.
use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `import_circles.py --check BASELINE SRC`.
fn check(src: &Path) -> Output {
    Command::new("python3")
        .arg(root().join("scripts/dev/import_circles.py"))
        .arg("--check")
        .arg(root().join("scripts/dev/import_circles.baseline"))
        .arg(src)
        .output()
        .expect("python3 runs scripts/dev/import_circles.py")
}

/// A copy of src/ (every file, every folder) with `line` appended to the file `file`.
fn planted(dir: &Path, file: &str, line: &str) -> PathBuf {
    fn copy_tree(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                copy_tree(&e.path(), &to.join(e.file_name()));
            } else {
                std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
            }
        }
    }
    let src = dir.join("src");
    copy_tree(&root().join("src"), &src);
    let path = src.join(file);
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(line);
    text.push('\n');
    std::fs::write(&path, text).unwrap();
    src
}

#[test]
fn the_tree_has_no_folder_circle_and_no_file_circle_above_the_baseline() {
    let _turn = common::module_turn(module_path!());
    let out = check(&root().join("src"));
    let text = common::text(&out);
    assert!(out.status.success(), "the import-circle check fails on the tree:\n{text}");
    assert!(text.contains("folder circles: 0 (0 folders)"), "{text}");
}

#[test]
fn a_planted_folder_circle_fails_the_check_and_is_named() {
    let _turn = common::module_turn(module_path!());
    let dir = common::WorkDir::new("import-circles-folder");
    // models/weights imports torch_file's state_dict_of; this closes the circle.
    let src = planted(&dir, "torch_file/read.rs", "use crate::models::LoadReport;");
    let out = check(&src);
    let text = common::text(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("folder circle: models <-> torch_file"), "{text}");
    assert!(text.contains("torch_file/read -> models/weights"), "{text}");
    assert!(text.contains("import circles: error: 1 folder circle(s)"), "{text}");
}

#[test]
fn a_planted_file_circle_fails_the_check_as_one_above_the_baseline() {
    let _turn = common::module_turn(module_path!());
    let dir = common::WorkDir::new("import-circles-file");
    // models/resnet imports resnet_blocks' items; this closes a circle inside models/.
    let src = planted(&dir, "models/resnet_blocks.rs", "use super::resnet::resnet34;");
    let out = check(&src);
    let text = common::text(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("file circle: models/resnet <-> models/resnet_blocks"), "{text}");
    assert!(text.contains("folder circles: 0 (0 folders)"), "{text}");
    assert!(
        text.contains("import circles: error: file_circles = 1, above the baseline's 0"),
        "{text}"
    );
}
