//! The evcxr REPL and JupyterLab, as a student starts them: scripts/kernel/trainbook-repl driven
//! through its stdin (`:dep trainbook`, a tensor, a training epoch, a figure saved to a file),
//! and the venv's `jupyter` (the `trainbook` kernel listed, JupyterLab installed). Both need the
//! set-up (`make setup`, which `make test` runs; or `make setup-repl` / `make setup-notebook`)
//! and fail saying so when it is missing.
use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{run_streaming, run_with_deadline, text, venv_bin, WorkDir};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A version pinned in scripts/setup/setup.sh (`NAME=x.y.z`).
fn pinned(name: &str) -> String {
    let setup = std::fs::read_to_string(Path::new(ROOT).join("scripts/setup/setup.sh")).unwrap();
    let prefix = format!("{name}=");
    setup
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("scripts/setup/setup.sh pins no {name}"))
        .to_string()
}

/// One REPL session: every input is one line, as typed. The first run compiles trainbook and its
/// dependencies inside evcxr (tch, torch-sys's C++ wrapper, the c10d shim): 879 s (15 minutes)
/// on 2 cores shared with another build, from an empty build slot; 399 s when a notebook had
/// built the dependencies in that slot (~/.cache/trainbook/evcxr/slot-N, shared with the
/// notebooks' kernel) and only trainbook was compiled; 38 s once trainbook is built there.
#[test]
#[ignore = "long tier (make test-long, make test-repl): an evcxr_repl build, then trainbook built inside evcxr"]
fn long_the_repl_loads_trainbook_trains_and_saves_a_figure() {
    let _turn = common::module_turn(module_path!());
    let cargo_bin = PathBuf::from(
        std::env::var("CARGO_HOME")
            .unwrap_or_else(|_| format!("{}/.cargo", std::env::var("HOME").unwrap())),
    )
    .join("bin");
    assert!(
        cargo_bin.join("evcxr").exists(),
        "evcxr_repl (its program `evcxr`) is not installed in {}: run `make setup` (or \
         `make setup-repl`, scripts/setup/setup.sh --repl) first",
        cargo_bin.display()
    );
    common::venv();

    let dir = WorkDir::new("repl");
    let input = format!(
        r#":dep trainbook = {{ path = "{ROOT}" }}
use trainbook::prelude::*;
use trainbook::data::TensorDataset;
let t = Tensor::from_slice(&[1.0f32, 2.0, 3.5]) * 2.0; println!("tensor sum {{}}", t.sum(Kind::Float).double_value(&[]));
trainbook::tch::manual_seed(0); let x = Tensor::randn([64, 1, 28, 28], (Kind::Float, Device::Cpu)); let y = Tensor::randint(10, [64], (Kind::Int64, Device::Cpu));
let classes: Vec<String> = (0..10).map(|c| c.to_string()).collect(); let mut loader = DataLoader::new(TensorDataset::new(&x, &y, classes)?, 16).num_workers(0);
let vs = VarStore::new(Device::Cpu); let net = MnistNet::new(&vs.root()); let mut opt = Optimizer::adam(&vs, 1e-3);
let s = train_epoch(&net, &mut loader, &mut opt, &CrossEntropyLoss::new(), &EpochOptions::on(Device::Cpu).quiet())?; println!("epoch samples {{}} loss {{:.3}}", s.samples, s.loss);
let fig = loss_accuracy_curves(&[EpochRecord {{ train_loss: s.loss, train_acc: s.accuracy, ..Default::default() }}])?;
fig
"#
    );
    let input_file = dir.join("input.txt");
    std::fs::write(&input_file, input).unwrap();

    let start = Instant::now();
    // stderr (evcxr's compile errors, the script's messages) joins stdout, to be checked too.
    let (status, out) = run_streaming(
        Command::new("bash")
            .arg("-c")
            .arg(r#"exec "$0" 2>&1"#)
            .arg(Path::new(ROOT).join("scripts/kernel/trainbook-repl"))
            .current_dir(&dir)
            .env_remove("TRAINBOOK_FIGURES")
            // evcxr's own config (~/.config/evcxr: init.evcxr, prelude.rs, history) stays out.
            .env("XDG_CONFIG_HOME", dir.join("config"))
            .stdin(Stdio::from(std::fs::File::open(&input_file).unwrap())),
        Duration::from_secs(3600),
        "scripts/kernel/trainbook-repl",
    );
    println!("REPL session: {:.0} s", start.elapsed().as_secs_f64());
    assert!(status.success(), "the REPL exited with {status}:\n{out}");
    assert!(out.contains("tensor sum 13"), "no tensor value printed:\n{out}");
    assert!(out.contains("epoch samples 64 loss"), "no training epoch:\n{out}");

    // The figure went to figures/ under the REPL's working directory, not into the notebook
    // protocol (which the REPL would drop).
    assert!(!out.contains("EVCXR_BEGIN_CONTENT"), "{out}");
    let saved = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("figure saved to "))
        .unwrap_or_else(|| panic!("no `figure saved to` line:\n{out}"));
    let path = Path::new(saved);
    assert_eq!(path.parent(), Some(dir.join("figures").as_path()), "{out}");
    let img = image::open(path).unwrap_or_else(|e| panic!("{saved} is no image: {e}"));
    assert!(img.width() >= 300 && img.height() >= 200, "a {}x{} figure", img.width(), img.height());
}

/// The README's `.venv/bin/jupyter-lab notebooks/` works, and Jupyter lists the kernel.
#[test]
fn jupyterlab_and_the_trainbook_kernel_are_in_the_venv() {
    let _turn = common::module_turn(module_path!());
    let jupyter = venv_bin("jupyter");
    let lab = venv_bin("jupyter-lab");
    assert!(
        jupyter.exists() && lab.exists(),
        "no {} or {}: run `make setup` (or `make setup-notebook`) first",
        jupyter.display(),
        lab.display()
    );
    let out = run_with_deadline(
        Command::new(&jupyter).args(["kernelspec", "list"]),
        Duration::from_secs(120),
        "jupyter kernelspec list",
    );
    assert!(out.status.success(), "{}", text(&out));
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    let spec_dir = listed
        .lines()
        .find_map(|l| l.trim().strip_prefix("trainbook "))
        .unwrap_or_else(|| {
            panic!("no `trainbook` kernel (run `make setup-notebook`):\n{}", text(&out))
        })
        .trim();
    let spec: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(spec_dir).join("kernel.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(spec["display_name"], "Rust (trainbook)", "{spec}");
    assert!(
        spec["argv"][0].as_str().unwrap().ends_with("scripts/kernel/trainbook-kernel"),
        "{spec}"
    );
    // The kernelspec names the kernel cache the set-up built, so that a user with another home
    // (a class sharing this venv) seeds from it instead of compiling tch and trainbook again.
    let built = std::env::var("TRAINBOOK_KERNEL_CACHE").unwrap_or_else(|_| {
        let base = std::env::var("XDG_CACHE_HOME")
            .unwrap_or_else(|_| format!("{}/.cache", std::env::var("HOME").unwrap()));
        format!("{base}/trainbook/kernel-cache")
    });
    let named = spec["env"]["TRAINBOOK_KERNEL_CACHE"].as_str().unwrap_or_default();
    assert_eq!(Path::new(named), Path::new(&built), "{spec}");
    assert!(Path::new(named).join("current").exists(), "no built cache at {named}");

    let out = run_with_deadline(
        Command::new(&jupyter).args(["lab", "--version"]),
        Duration::from_secs(120),
        "jupyter lab --version",
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), pinned("JUPYTERLAB_VERSION"));
}
