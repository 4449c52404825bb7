//! The `cuda` feature (NCCL process group, libtorch_cuda) compiles on a machine without a GPU,
//! the GPU suite (`tests/gpu.rs`) included.
mod common;

use std::process::Command;
use std::time::Duration;

use common::{run_with_deadline, text};

#[test]
fn cuda_feature_compiles() {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = run_with_deadline(
        Command::new(env!("CARGO"))
            .args([
                "check",
                "--features",
                "cuda",
                "--lib",
                "--bins",
                "--test",
                "gpu",
                "--message-format",
                "short",
            ])
            .current_dir(root),
        Duration::from_secs(1500),
        "cargo check --features cuda",
    );
    assert!(out.status.success(), "cargo check --features cuda failed\n{}", text(&out));
}
