//! The headline: the MNIST example under `torchrun --nproc-per-node=2 --max-restarts=1`, one
//! worker SIGKILLed after the first checkpoint; torchrun restarts the group, the run resumes
//! mid-epoch from the checkpoint and ends with exactly the weights of an uninterrupted run
//! (every tensor of `model.safetensors` equal bit for bit).
mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use trainbook::train::read_records;

const ARGS: [&str; 6] = ["--epochs", "2", "--save-every-steps", "20", "--workers", "1"];

fn torchrun(out: &Path, data: &Path, restarts: u32) -> Command {
    let mut cmd = Command::new(common::venv_bin("torchrun"));
    cmd.args([
        "--standalone",
        "--nproc-per-node=2",
        &format!("--max-restarts={restarts}"),
        "--no-python",
    ])
    .arg(common::target_exe("examples/mnist"))
    .args(ARGS)
    .arg("--out")
    .arg(out)
    .arg("--data")
    .arg(data)
    .env("TRAINBOOK_DIST_TIMEOUT", "60");
    cmd
}

#[test]
fn killed_worker_resumes_to_identical_weights() {
    let work = common::WorkDir::new("fault");
    let data = work.join("mnist");
    common::offline_mnist(&data);

    // The uninterrupted reference.
    let (a, b) = (work.join("uninterrupted"), work.join("interrupted"));
    let o = common::run_with_deadline(
        &mut torchrun(&a, &data, 0),
        Duration::from_secs(900),
        "uninterrupted run",
    );
    assert!(o.status.success(), "{}", common::text(&o));

    // The same run, with rank 1 killed once the first checkpoint exists.
    let mut run =
        torchrun(&b, &data, 1).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let killed = common::kill_rank_after_first_checkpoint(
        &mut run,
        &b.join("checkpoints"),
        1,
        Duration::from_secs(600),
    );
    let o = common::wait_with_deadline(run, Duration::from_secs(900), "interrupted run");
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(
        o.status.success(),
        "torchrun should restart the group and finish (killed pid {killed})\n{stdout}\n{stderr}"
    );
    let resumed = stdout
        .lines()
        .find(|l| l.contains("resuming from"))
        .unwrap_or_else(|| panic!("no resume in:\n{stdout}"));
    println!("killed rank 1 (pid {killed}); {resumed}");
    assert_eq!(read_records(&b.join("metrics.jsonl")).unwrap().len(), 2);

    // Both runs: the same binary, arguments, world size and thread counts (torchrun's
    // OMP_NUM_THREADS=1), so the same kernels in the same order, and the checkpoint restores
    // the whole state: the weights are equal by construction, not merely close.
    common::assert_same_weights(
        &a.join("model.safetensors"),
        &b.join("model.safetensors"),
        "final weights, interrupted vs uninterrupted",
    );
}
