//! The notebook exporter round trip: notebooks/02-mnist-ddp.ipynb becomes a Cargo project that
//! builds, and the exported MNIST program trains as 2 ranks under `torchrun --no-python`.
mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[test]
fn exported_mnist_notebook_builds_and_runs_under_torchrun() {
    let scratch = common::WorkDir::new("export");
    let out = scratch.join("project");
    let o = common::run_with_deadline(
        Command::new(env!("CARGO_BIN_EXE_trainbook-export"))
            .arg(Path::new(ROOT).join("notebooks/02-mnist-ddp.ipynb"))
            .arg(&out),
        Duration::from_secs(60),
        "trainbook-export",
    );
    assert!(o.status.success(), "{}", common::text(&o));
    let main = std::fs::read_to_string(out.join("src/main.rs")).unwrap();
    assert!(
        main.contains("fn main()") && main.contains("spawn(2") && main.contains("train_epoch("),
        "{main}"
    );
    assert!(
        !main.contains("example_binary") && main.contains("notebook-only, skipped"),
        "notebook-only cells must be dropped:\n{main}"
    );
    assert!(main.contains("evcxr command dropped") || !main.contains(":dep"));
    let toml = std::fs::read_to_string(out.join("Cargo.toml")).unwrap();
    assert!(
        toml.contains(&format!(
            "trainbook = {{ path = \"{}\", default-features = false }}",
            std::fs::canonicalize(ROOT).unwrap().display()
        )),
        "{toml}"
    );

    let exe = common::build_exported(&out);
    let run = common::run_with_deadline(
        Command::new(common::venv_bin("torchrun"))
            .args(["--standalone", "--nproc-per-node=2", "--no-python"])
            .arg(&exe)
            .current_dir(Path::new(ROOT).join("notebooks")),
        Duration::from_secs(900),
        "exported program under torchrun",
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{}", common::text(&run));
    let line = stdout
        .lines()
        .find(|l| l.contains("world size 2: validation accuracy"))
        .unwrap_or_else(|| panic!("{stdout}"));
    println!("exported notebook under torchrun: {line}");
}
