//! trainbook used as a dependency from a project outside its checkout: a fresh Cargo project
//! in a temporary directory (not under the checkout, so the checkout's `.cargo/config.toml`
//! and `.venv` are not found), given only an explicit Python (`TRAINBOOK_PYTHON`), libtorch
//! (`LIBTORCH`) and the CMake and NASM that build libjpeg-turbo (`CMAKE`, `CMAKE_PROGRAM_PATH`).
//! It prepares MNIST with the bundled data script, trains one epoch with `Trainer` (one rank)
//! and saves a figure.
use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

const MAIN_RS: &str = r#"
use trainbook::data::TensorDataset;
use trainbook::prelude::*;

fn main() -> trainbook::Result<()> {
    let data = std::path::Path::new("data/mnist");
    ensure_mnist(data)?;
    let raw = Mnist::new(data, true)?;
    let (images, labels) = raw.to_tensors();
    let classes: Vec<String> = MNIST_CLASSES.map(String::from).to_vec();
    let (train_n, val_n) = (1024, 256);
    let train = TensorDataset::new(&images.narrow(0, 0, train_n), &labels.narrow(0, 0, train_n), classes.clone())?;
    let val = TensorDataset::new(&images.narrow(0, train_n, val_n), &labels.narrow(0, train_n, val_n), classes)?;
    let dist = Dist::init()?;
    let mut train = DataLoader::new(train, 64).shuffle(true).distributed(&dist).num_workers(1);
    let mut val = DataLoader::new(val, 256).distributed(&dist).num_workers(1);
    trainbook::tch::manual_seed(0);
    let mut vs = VarStore::new(Device::Cpu);
    let net = MnistNet::new(&vs.root());
    let mut opt = Optimizer::adam(&vs, 1e-3);
    let report = Trainer::new(&dist).epochs(1).out("run").progress(false)
        .fit(&mut vs, &net, &mut opt, &mut train, &mut val)?;
    loss_accuracy_curves(&report.history)?.save("figure.png")?;
    println!("python: {}", trainbook::programs::python().display());
    println!("val accuracy: {:.4}", report.last().and_then(|r| r.val_acc).unwrap_or(0.0));
    Ok(())
}
"#;

#[test]
fn a_project_outside_the_checkout_prepares_data_trains_and_plots() {
    let _turn = common::module_turn(module_path!());
    let venv = common::venv();
    let python = venv.join("bin/python");
    // The venv's torch package (what the book's `LIBTORCH=$(python3 -c ...)` line in docs/src/cuda.md names: setup.sh
    // links .venv/libtorch to it), spelled as .cargo/config.toml spells it for this checkout: the
    // project builds into this checkout's target directory, and another spelling of LIBTORCH
    // would make cargo rebuild torch-sys and tch here and again at the checkout's next build.
    let libtorch = venv.join("libtorch");
    let project = tempfile::Builder::new().prefix("trainbook-outside-").tempdir().unwrap();
    let dir = project.path();
    assert!(!dir.starts_with(ROOT), "{} must be outside the checkout", dir.display());
    std::fs::create_dir_all(dir.join("src")).unwrap();
    // The README's dependency line ("In your own project"), pointed at this checkout. Without
    // default features, as the exported notebooks' projects depend on trainbook, with the same
    // profile: this build and theirs (tests/export.rs, the notebooks' spawn check) share one
    // compiled trainbook in the checkout's target directory.
    let readme = std::fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
    let line = readme
        .lines()
        .find(|l| l.starts_with("trainbook = { path = \"../trainbook\""))
        .expect("the README's dependency line for a project of your own");
    let dependency =
        line.split('#').next().unwrap().trim().replace("\"../trainbook\"", &format!("{ROOT:?}"));
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"outside\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [dependencies]\n{dependency}\n\n\
             [profile.dev]\nopt-level = 1\ndebug = \"line-tables-only\"\n\n\
             [profile.dev.package.\"*\"]\nopt-level = 2\ndebug = false\n\n[workspace]\n"
        ),
    )
    .unwrap();
    std::fs::copy(Path::new(ROOT).join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    std::fs::write(dir.join("src/main.rs"), MAIN_RS).unwrap();

    // The checkout's venv is not on PATH and not named by TRAINBOOK_VENV; Python and libtorch
    // are given explicitly. The build shares the checkout's target directory only to reuse the
    // compiled dependencies (a separate one would rebuild everything).
    let path = std::env::var("PATH").unwrap_or_default();
    let venv_bin = venv.join("bin");
    let path: Vec<&str> = path.split(':').filter(|p| Path::new(p) != venv_bin).collect();
    let env = |cmd: &mut Command| {
        cmd.current_dir(dir)
            .env_remove("TRAINBOOK_VENV")
            .env_remove("VIRTUAL_ENV")
            .env("PATH", path.join(":"))
            .env("TRAINBOOK_PYTHON", &python)
            .env("LIBTORCH", &libtorch)
            .env("LIBTORCH_CXX11_ABI", "1")
            .env("CMAKE", venv_bin.join("cmake"))
            .env("CMAKE_PROGRAM_PATH", &venv_bin);
    };
    let mut build = common::cargo();
    build
        .args(["build", "--message-format", "short"])
        .env("CARGO_TARGET_DIR", Path::new(ROOT).join("target"));
    env(&mut build);
    let out = common::run_with_deadline(&mut build, Duration::from_secs(1500), "cargo build");
    assert!(out.status.success(), "{}", common::text(&out));

    let mut run = Command::new(Path::new(ROOT).join("target/debug/outside"));
    env(&mut run);
    // A dependency's rpath does not reach this package's binary: libtorch comes from the
    // loader path, as the README says for projects of your own.
    run.env("LD_LIBRARY_PATH", libtorch.join("lib"));
    let out = common::run_with_deadline(&mut run, Duration::from_secs(600), "the outside program");
    let text = common::text(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains(&format!("python: {}", python.display())), "{text}");
    assert!(dir.join("data/mnist/t10k-labels-idx1-ubyte").exists(), "{text}");
    let acc: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("val accuracy: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!(acc > 0.5, "one epoch on 1,024 digits should pass 50% accuracy: {acc}\n{text}");
    let png = std::fs::read(dir.join("figure.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG"), "figure.png is not a PNG");
    for f in ["run/metrics.jsonl", "run/model.safetensors"] {
        assert!(dir.join(f).exists(), "{f} missing:\n{text}");
    }
}
