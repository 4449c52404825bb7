//! A class on one shared checkout: `make workspace` (scripts/notebooks/workspace.py) gives each
//! student a folder of their own, with their copies of the notebooks (whose `:dep` line names the
//! checkout), their own `runs/`, the class's data linked and their share of the GPUs; nothing in
//! the checkout is written. The fast tests check what the command makes and refuses; the long
//! one (`make test-long`) has three students run notebook 04, whose cells delete and rewrite their
//! run folders, at the same time, and checks that each ends with their own checkpoints while the
//! checkout's notebooks, data and runs stay as they were.
//!
//! The checkout is "read-only" here by observation, not by permission: the tests run as whoever
//! runs them (root on CI, where permissions stop nothing), so they compare every file's size and
//! modification time before and after.
use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

use crate::common::{text, venv_bin, wait_with_deadline};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn checkout() -> PathBuf {
    Path::new(ROOT).canonicalize().unwrap()
}

/// `python3 scripts/notebooks/workspace.py ARGS` (the system's Python, as a student's shell has it).
fn workspace(args: &[&str]) -> Output {
    Command::new("python3")
        .arg(Path::new(ROOT).join("scripts/notebooks/workspace.py"))
        .args(args)
        .output()
        .unwrap()
}

fn made(dir: &Path, args: &[&str]) -> String {
    let mut all = vec![dir.to_str().unwrap()];
    all.extend(args);
    let out = workspace(&all);
    assert!(out.status.success(), "workspace {all:?}:\n{}", text(&out));
    text(&out)
}

fn refused(dir: &Path, args: &[&str], says: &str) {
    let mut all = vec![dir.to_str().unwrap()];
    all.extend(args);
    let out = workspace(&all);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{all:?} should be refused:\n{said}");
    assert!(said.contains(says) && !said.contains("Traceback"), "{all:?}:\n{said}");
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn source(cell: &serde_json::Value) -> String {
    match &cell["source"] {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(lines) => lines.iter().filter_map(|l| l.as_str()).collect(),
        _ => String::new(),
    }
}

fn code_cells(notebook: &Path) -> Vec<String> {
    let nb = json(notebook);
    let cells = nb["cells"].as_array().unwrap();
    cells.iter().filter(|c| c["cell_type"] == "code").map(source).collect()
}

/// Every file under `dir` (symlinks not followed) with its size and modification time.
fn snapshot(dir: &Path, into: &mut BTreeMap<PathBuf, (u64, SystemTime)>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let meta = entry.path().symlink_metadata().unwrap();
        if meta.is_dir() {
            snapshot(&entry.path(), into);
        }
        into.insert(entry.path(), (meta.len(), meta.modified().unwrap()));
    }
}

/// What the checkout holds that a class must not change: its notebooks, each data set it has
/// now (data sets another test adds meanwhile are not counted) and notebook 04's runs.
fn checkout_files() -> BTreeMap<PathBuf, (u64, SystemTime)> {
    let root = checkout();
    let mut files = BTreeMap::new();
    snapshot(&root.join("notebooks"), &mut files);
    for entry in std::fs::read_dir(root.join("data")).into_iter().flatten().flatten() {
        snapshot(&entry.path(), &mut files);
    }
    for run in ["04-designsafe-resumable", "04-designsafe-torchrun"] {
        snapshot(&root.join("runs").join(run), &mut files);
    }
    files
}

fn notebooks() -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(checkout().join("notebooks"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ipynb"))
        .collect();
    found.sort();
    found
}

#[test]
fn a_workspace_has_its_own_notebooks_and_runs_and_links_the_class_data() {
    let _turn = common::module_turn(module_path!());
    let root = checkout();
    let before = checkout_files();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ann");
    let said = made(&ws, &["--share", "2/3", "--gpu-count", "4", "--name", "ann"]);
    assert!(said.contains("GPUs: 1 "), "{said}");

    // The notebooks: every code cell as in the checkout but the `:dep` line, which names the
    // checkout itself; a first cell says where this workspace's files go and its GPUs.
    for original in notebooks() {
        let copy = ws.join("notebooks").join(original.file_name().unwrap());
        let (theirs, mine) = (code_cells(&original), code_cells(&copy));
        assert_eq!(theirs.len(), mine.len(), "{}", copy.display());
        for (a, b) in theirs.iter().zip(&mine) {
            if a.starts_with(":dep trainbook") {
                assert!(
                    b.starts_with(&format!(":dep trainbook = {{ path = \"{}\"", root.display()))
                );
                assert!(b.contains("default-features = false"), "{b}");
            } else {
                assert_eq!(a, b, "{}: a code cell changed", copy.display());
            }
        }
        let first = &json(&copy)["cells"][0];
        assert_eq!(first["metadata"]["tags"][0], "workspace");
        let said = source(first);
        assert!(
            said.contains(&ws.join("runs").display().to_string())
                && said.contains("CUDA_VISIBLE_DEVICES=1"),
            "{said}"
        );
    }
    // The class's data sets, linked; the rest of the checkout the cells read, linked too.
    for entry in std::fs::read_dir(root.join("data")).into_iter().flatten().flatten() {
        let link = ws.join("data").join(entry.file_name());
        assert_eq!(std::fs::read_link(&link).unwrap(), entry.path(), "{}", link.display());
    }
    for sub in ["examples", "docs", "launchers", "data-scripts", "notebooks/figures"] {
        assert_eq!(std::fs::read_link(ws.join(sub)).unwrap(), root.join(sub));
    }
    assert!(ws.join("runs").is_dir() && std::fs::read_dir(ws.join("runs")).unwrap().count() == 0);
    // example_binary's way to the checkout's examples, and the GPUs for Jupyter.
    let about = json(&ws.join("trainbook-workspace.json"));
    assert_eq!(about["checkout"], root.to_str().unwrap());
    assert_eq!(about["gpus"], serde_json::json!([1]));
    let jupyter = std::fs::read_to_string(ws.join("jupyter.sh")).unwrap();
    assert!(jupyter.contains("export CUDA_VISIBLE_DEVICES=1\n"), "{jupyter}");
    assert!(Command::new("bash").arg("-n").arg(ws.join("jupyter.sh")).status().unwrap().success());

    // Run again: a student's edited notebook stays; --refresh-notebooks replaces it, keeping a
    // copy; the GPUs stay without a GPU option.
    let edited = ws.join("notebooks/01-mnist.ipynb");
    std::fs::write(&edited, "{\"mine\": true}").unwrap();
    let said = made(&ws, &[]);
    assert!(said.contains("kept as they were") && said.contains("GPUs: 1 "), "{said}");
    assert_eq!(std::fs::read_to_string(&edited).unwrap(), "{\"mine\": true}");
    made(&ws, &["--refresh-notebooks"]);
    assert_eq!(code_cells(&edited).len(), code_cells(&root.join("notebooks/01-mnist.ipynb")).len());
    let kept = ws.join("notebooks/01-mnist.ipynb.bak");
    assert_eq!(std::fs::read_to_string(kept).unwrap(), "{\"mine\": true}");

    assert_eq!(before, checkout_files(), "making a workspace changed the checkout");
}

#[test]
fn each_student_gets_their_share_of_the_gpus_and_cores() {
    let _turn = common::module_turn(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    // (share, GPUs on the node) -> CUDA_VISIBLE_DEVICES: a block each, or one shared in turn.
    for (share, count, visible) in [
        ("1/2", "4", "0,1"),
        ("2/2", "4", "2,3"),
        ("3/3", "4", "2,3"),
        ("1/3", "4", "0"),
        ("2/3", "2", "1"),
        ("3/3", "2", "0"),
        ("1/1", "0", "''"),
    ] {
        let ws = tmp.path().join(format!("s{}-{count}", share.replace('/', "of")));
        made(&ws, &["--share", share, "--gpu-count", count]);
        let jupyter = std::fs::read_to_string(ws.join("jupyter.sh")).unwrap();
        assert!(
            jupyter.contains(&format!("export CUDA_VISIBLE_DEVICES={visible}\n")),
            "{share} of {count}: {jupyter}"
        );
    }
    // Their share of the cores too: libtorch's threads in their kernels (OMP_NUM_THREADS).
    for (share, cpus, threads) in [("2/3", "2", "1"), ("1/2", "16", "8"), ("3/3", "16", "5")] {
        let ws = tmp.path().join(format!("t{}-{cpus}", share.replace('/', "of")));
        made(&ws, &["--share", share, "--gpu-count", "0", "--cpu-count", cpus]);
        let jupyter = std::fs::read_to_string(ws.join("jupyter.sh")).unwrap();
        assert!(jupyter.contains(&format!("export OMP_NUM_THREADS={threads}\n")), "{jupyter}");
        let about = json(&ws.join("trainbook-workspace.json"));
        assert_eq!(about["threads"], threads.parse::<u64>().unwrap());
    }
    let ws = tmp.path().join("chosen");
    made(&ws, &["--gpus", "5,7", "--threads", "3"]);
    let jupyter = std::fs::read_to_string(ws.join("jupyter.sh")).unwrap();
    assert!(jupyter.contains("export OMP_NUM_THREADS=3\n"), "{jupyter}");
    assert_eq!(json(&ws.join("trainbook-workspace.json"))["gpus"], serde_json::json!([5, 7]));
    // No GPU option: the node's default, no CUDA_VISIBLE_DEVICES at all.
    let ws = tmp.path().join("default");
    made(&ws, &[]);
    let jupyter = std::fs::read_to_string(ws.join("jupyter.sh")).unwrap();
    assert!(!jupyter.contains("CUDA_VISIBLE") && !jupyter.contains("OMP_NUM_THREADS"), "{jupyter}");
}

#[test]
fn a_workspace_in_the_wrong_place_or_with_bad_options_is_refused_by_name() {
    let _turn = common::module_turn(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let inside = checkout().join("target/tmp/a-student");
    refused(&inside, &[], "must lie outside the shared checkout");
    assert!(!inside.exists(), "a refused workspace was made");
    let foreign = tmp.path().join("thesis");
    std::fs::create_dir_all(&foreign).unwrap();
    std::fs::write(foreign.join("chapter1.tex"), "x").unwrap();
    refused(&foreign, &[], "is not a trainbook workspace");
    assert_eq!(std::fs::read_dir(&foreign).unwrap().count(), 1, "files added to a foreign folder");
    let file = tmp.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    refused(&file, &[], "is not a folder");
    let ws = tmp.path().join("ws");
    refused(&ws, &["--share", "4/3"], "--share '4/3'");
    refused(&ws, &["--share", "0/3"], "--share '0/3'");
    refused(&ws, &["--gpus", "a,b"], "--gpus 'a,b'");
    refused(&ws, &["--threads", "0"], "--threads 0");
    assert!(!ws.exists());
}

/// Three students run notebook 04 at once, each in a workspace of their own on this checkout.
#[test]
#[ignore = "long tier (make test-long): three kernels run notebook 04 at the same time"]
fn long_three_students_run_notebook_04_at_once_on_one_checkout() {
    let _turn = common::module_turn(module_path!());
    let root = checkout();
    // The instructor's step: the class's data made before the class.
    trainbook::data::ensure_designsafe(&root.join("data/designsafe-small/Dataset_2"), true)
        .unwrap();
    let before = checkout_files();
    let tmp = tempfile::tempdir().unwrap();
    let students = ["ann", "ben", "cy"];
    let spaces: Vec<PathBuf> = students.iter().map(|s| tmp.path().join(s)).collect();
    for (name, ws) in students.iter().zip(&spaces) {
        made(ws, &["--name", name]);
    }
    let runs: Vec<_> = spaces
        .iter()
        .map(|ws| {
            Command::new(venv_bin("python"))
                .arg(root.join("scripts/notebooks/run_notebooks.py"))
                .arg(ws.join("notebooks/04-designsafe-torchrun.ipynb"))
                .arg("--out")
                .arg(ws.join("executed"))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<Output> = runs
        .into_iter()
        .zip(students)
        .map(|(child, name)| wait_with_deadline(child, Duration::from_secs(3600), name))
        .collect();
    for ((name, ws), out) in students.iter().zip(&spaces).zip(&outs) {
        let said = text(out);
        assert!(
            out.status.success() && said.contains("notebooks: 1 passed, 0 failed"),
            "{name}:\n{said}"
        );
        let printed =
            std::fs::read_to_string(ws.join("executed/04-designsafe-torchrun.ipynb")).unwrap();
        for line in ["second run: trained epochs [2]", "resumed after the crash: true"] {
            assert!(printed.contains(line), "{name}: no {line:?}");
        }
        // Each student's own checkpoints: both runs complete, in their own runs/ folder.
        for (run, kept) in [
            ("04-designsafe-resumable", ["step-000000029", "step-000000058"]),
            ("04-designsafe-torchrun", ["step-000000054", "step-000000058"]),
        ] {
            let dir = ws.join("runs").join(run).join("checkpoints");
            let mut steps: Vec<String> = std::fs::read_dir(&dir)
                .unwrap_or_else(|e| panic!("{name}: {}: {e}", dir.display()))
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("step-"))
                .collect();
            steps.sort();
            assert_eq!(steps, kept, "{name}: {}", dir.display());
        }
        let model = ws.join("runs/04-designsafe-torchrun/model.safetensors");
        assert!(model.is_file(), "{name}: {}", model.display());
        // The notebooks the student did not run are as the command made them.
        let other = ws.join("notebooks/03-designsafe.ipynb");
        assert_eq!(
            code_cells(&other).len(),
            code_cells(&root.join("notebooks/03-designsafe.ipynb")).len()
        );
    }
    assert_eq!(before, checkout_files(), "the students' runs changed the shared checkout");
}
