//! The `cuda` feature (NCCL process group, libtorch_cuda): it compiles on a machine without a
//! GPU, with every target of the GPU bundle (the GPU suites `tests/gpu.rs` and
//! `tests/gpu_ranks.rs`, `benches/gpu.rs`, the examples; `make test`'s dev bundle builds only the
//! GPU suite with it, see tests/gpu_bundle.rs); and where the libtorch in use has its CUDA
//! libraries (a CUDA wheel, as `make setup` installs), a binary built with it links against
//! libtorch_cuda, starts, and has CUDA registered with libtorch. Elsewhere (a CPU build of
//! libtorch) the link check says SKIPPED with the reason.
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{run_with_deadline, text, wait_with_deadline};

/// Generous: a build of trainbook with the feature on 2 busy cores.
const BUILD_LIMIT: Duration = Duration::from_secs(2400);

#[test]
fn cuda_feature_compiles() {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = run_with_deadline(
        common::cargo()
            .args([
                "check",
                "--features",
                "cuda",
                "--lib",
                "--bins",
                "--examples",
                "--test",
                "gpu",
                "--test",
                "gpu_ranks",
                "--bench",
                "gpu",
                "--message-format",
                "short",
            ])
            .current_dir(root),
        BUILD_LIMIT,
        "cargo check --features cuda",
    );
    assert!(out.status.success(), "cargo check --features cuda failed\n{}", text(&out));
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

#[test]
fn cuda_feature_links_and_loads_libtorch_cuda() {
    let lib = Path::new(trainbook::versions().libtorch_lib_dir);
    if !lib.join("libtorch_cuda.so").exists() {
        common::skip(
            "cuda_feature_links_and_loads_libtorch_cuda",
            &format!(
                "{} has no libtorch_cuda.so (a CPU build of libtorch), so there is nothing to \
                 link the cuda feature against; `cargo check --features cuda` still runs \
                 (cuda_feature_compiles)",
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
