//! The `cuda` feature (NCCL process group, libtorch_cuda). Only two places read it: build.rs
//! (the c10d shim's NCCL part and the link to libtorch_cuda, through `CARGO_FEATURE_CUDA`) and
//! the GPU suite `tests/gpu.rs` (plus one `cfg!` in tests/parity/tch_smoke.rs), which
//! `the_cuda_feature_is_read_only_by_the_build_script_and_the_gpu_suite` keeps true. So every
//! other target of the GPU bundle (`tests/gpu_ranks.rs`, `benches/gpu.rs`, the examples)
//! compiles with the feature exactly as without it, and one build proves the feature: where the
//! libtorch in use has its CUDA libraries (a CUDA wheel, as `make setup` installs), the GPU suite
//! built with it (the build `make test`'s dev GPU bundle uses, made once by scripts/run-tests.sh
//! before the tests start) links against libtorch_cuda, starts, and has CUDA registered with
//! libtorch; on a CPU build of libtorch, where nothing can link, `cargo check --features cuda`
//! of every bundle target instead.
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{run_with_deadline, text, wait_with_deadline};

/// Generous: a build of trainbook with the feature on 2 busy cores.
const BUILD_LIMIT: Duration = Duration::from_secs(2400);

/// The files that may name the `cuda` feature, relative to the checkout.
const READERS_OF_THE_FEATURE: [&str; 4] =
    ["build.rs", "tests/gpu.rs", "tests/parity/tch_smoke.rs", "tests/cuda_feature.rs"];

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

/// What the one-build reasoning above rests on: no Rust outside [`READERS_OF_THE_FEATURE`] reads
/// the feature (`feature = "cuda"` in a `cfg`, `CARGO_FEATURE_CUDA`), so the library, the
/// examples, the benches and every other test compile the same with it and without.
#[test]
fn the_cuda_feature_is_read_only_by_the_build_script_and_the_gpu_suite() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("build.rs")];
    for dir in ["src", "examples", "benches", "tests"] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 100, "{} Rust files found under {}", files.len(), root.display());
    let mut readers: Vec<String> = files
        .iter()
        .filter(|f| {
            let code: String = std::fs::read_to_string(f)
                .unwrap()
                .chars()
                .filter(|c| !c.is_whitespace())
                .collect();
            code.contains("feature=\"cuda\"") || code.contains("CARGO_FEATURE_CUDA")
        })
        .map(|f| f.strip_prefix(root).unwrap().display().to_string())
        .collect();
    readers.sort();
    let mut allowed: Vec<String> = READERS_OF_THE_FEATURE.iter().map(|s| s.to_string()).collect();
    allowed.sort();
    assert_eq!(
        readers, allowed,
        "the cuda feature is read outside the build script and the GPU suite: the bundle's other \
         targets are then no longer proved by the GPU suite's cuda build (tests/cuda_feature.rs)"
    );
}

/// The executable cargo reports for the test target `name` in its JSON messages.
fn test_executable(messages: &str, name: &str) -> Option<PathBuf> {
    messages.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()).find_map(
        |m| {
            let target = &m["target"];
            let is_test = target["kind"].as_array().is_some_and(|k| k.iter().any(|k| k == "test"));
            (m["reason"] == "compiler-artifact" && target["name"] == name && is_test)
                .then(|| m["executable"].as_str().map(PathBuf::from))
                .flatten()
        },
    )
}

/// `cargo check --features cuda` of every target of the GPU bundle: what proves the feature
/// where nothing can link it (a CPU build of libtorch).
fn check_every_bundle_target() {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = run_with_deadline(
        common::cargo()
            .args(["check", "--features", "cuda", "--lib", "--bins", "--examples"])
            .args(["--test", "gpu", "--test", "gpu_ranks", "--bench", "gpu"])
            .args(["--message-format", "short"])
            .current_dir(root),
        BUILD_LIMIT,
        "cargo check --features cuda",
    );
    assert!(out.status.success(), "cargo check --features cuda failed\n{}", text(&out));
}

#[test]
fn cuda_feature_compiles_links_and_loads_libtorch_cuda() {
    let lib = Path::new(trainbook::versions().libtorch_lib_dir);
    if !lib.join("libtorch_cuda.so").exists() {
        check_every_bundle_target();
        common::skip(
            "cuda_feature_compiles_links_and_loads_libtorch_cuda",
            &format!(
                "{} has no libtorch_cuda.so (a CPU build of libtorch), so there is nothing to \
                 link the cuda feature against; `cargo check --features cuda` of every bundle \
                 target passed",
                lib.display()
            ),
        );
        return;
    }
    let root = env!("CARGO_MANIFEST_DIR");
    // cargo's JSON messages would overflow a pipe read only at the end: files instead.
    let (messages, errors) =
        (tempfile::NamedTempFile::new().unwrap(), tempfile::NamedTempFile::new().unwrap());
    let build = common::cargo()
        .args(["build", "--features", "cuda", "--test", "gpu", "--message-format", "json"])
        .stdout(messages.reopen().unwrap())
        .stderr(errors.reopen().unwrap())
        .current_dir(root)
        .spawn()
        .expect("cargo starts");
    let status = wait_with_deadline(build, BUILD_LIMIT, "cargo build --features cuda").status;
    let stdout = std::fs::read_to_string(messages.path()).unwrap();
    let stderr = std::fs::read_to_string(errors.path()).unwrap();
    assert!(status.success(), "cargo build --features cuda --test gpu failed\n{stderr}");
    let exe = test_executable(&stdout, "gpu").expect("cargo names the gpu test executable");
    // The linked binary starts (the dynamic loader finds libtorch_cuda and its CUDA libraries)
    // and has libtorch_cuda mapped, NCCL built in; GPU or not.
    let run = run_with_deadline(
        Command::new(&exe).args([
            "--exact",
            "the_cuda_build_loads_libtorch_cuda",
            "--nocapture",
            "--test-threads=1",
        ]),
        Duration::from_secs(300),
        "the gpu suite built with --features cuda",
    );
    assert!(run.status.success(), "{} failed\n{}", exe.display(), text(&run));
    assert!(
        String::from_utf8_lossy(&run.stdout).contains("1 passed"),
        "the check ran in the cuda build\n{}",
        text(&run)
    );
}
