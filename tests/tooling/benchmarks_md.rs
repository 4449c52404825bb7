//! BENCHMARKS.md is generated from the benches' records (benches/results/BENCH/KIND.json) by
//! scripts/bench/bench_records.py: the committed file is what the records give, and the script
//! turns each bench's JSON into its record (scripts/bench/test_bench_records.py).
use crate::common;

use std::path::Path;
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn python(args: &[&str], dir: &Path) -> (bool, String) {
    let out = Command::new(common::venv_bin("python"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the venv's python");
    (out.status.success(), common::text(&out))
}

#[test]
fn benchmarks_md_is_what_the_records_give() {
    let _turn = common::module_turn(module_path!());
    let (ok, text) =
        python(&["scripts/bench/bench_records.py", "render", "--check"], ROOT.as_ref());
    assert!(ok && text.contains("BENCHMARKS.md matches the records"), "{text}");
}

#[test]
fn each_benchs_json_becomes_its_record() {
    let _turn = common::module_turn(module_path!());
    let (ok, text) = python(
        &["-m", "unittest", "-v", "test_bench_records"],
        &Path::new(ROOT).join("scripts/bench"),
    );
    assert!(ok && text.contains("Ran 6 tests") && text.contains("\nOK"), "{text}");
}
