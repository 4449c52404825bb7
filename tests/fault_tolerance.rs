//! The headline: the MNIST example under `torchrun --nproc-per-node=2 --max-restarts=1`, one
//! worker SIGKILLed after the first checkpoint; torchrun restarts the group, the run resumes
//! mid-epoch from the checkpoint and ends with exactly the weights of an uninterrupted run.
mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tch::Kind;
use trainbook::models::from_safetensors_bytes;
use trainbook::notebook::launch::worker_pid;
use trainbook::train::read_records;

const ARGS: [&str; 6] = ["--epochs", "2", "--save-every-steps", "20", "--workers", "1"];

fn mnist_exe() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/debug/examples/mnist")
}

fn torchrun(out: &Path, data: &Path, restarts: u32) -> Command {
    let mut cmd = Command::new(common::venv_bin("torchrun"));
    cmd.args(["--standalone", "--nproc-per-node=2", &format!("--max-restarts={restarts}"), "--no-python"])
        .arg(mnist_exe())
        .args(ARGS)
        .arg("--out")
        .arg(out)
        .arg("--data")
        .arg(data)
        .env("TRAINBOOK_DIST_TIMEOUT", "60");
    cmd
}

fn model(out: &Path) -> Vec<(String, tch::Tensor)> {
    let path = out.join("model.safetensors");
    let mut t = from_safetensors_bytes(&std::fs::read(&path).unwrap(), &path).unwrap();
    t.sort_by(|a, b| a.0.cmp(&b.0));
    t
}

#[test]
fn killed_worker_resumes_to_identical_weights() {
    let work = common::WorkDir::new("fault");
    let data = work.join("mnist");
    let built = Command::new("python3").arg(concat!(env!("CARGO_MANIFEST_DIR"), "/data-scripts/mnist.py")).arg(&data).arg("--offline").status().unwrap();
    assert!(built.success());

    // The uninterrupted reference.
    let (a, b) = (work.join("uninterrupted"), work.join("interrupted"));
    let o = common::run_with_deadline(&mut torchrun(&a, &data, 0), Duration::from_secs(900), "uninterrupted run");
    assert!(o.status.success(), "{}", common::text(&o));

    // The same run, with rank 1 killed once the first checkpoint exists.
    let mut run = torchrun(&b, &data, 1).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let start = Instant::now();
    let ckpts = b.join("checkpoints");
    let killed = loop {
        assert!(start.elapsed() < Duration::from_secs(600), "no checkpoint appeared");
        let has_ckpt = std::fs::read_dir(&ckpts).is_ok_and(|d| d.flatten().any(|e| e.file_name().to_string_lossy().starts_with("step-")));
        if has_ckpt {
            if let Some(pid) = worker_pid(run.id(), 1) {
                assert!(Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap().success());
                break pid;
            }
        }
        if run.try_wait().unwrap().is_some() {
            panic!("the run ended before a worker could be killed");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let o = common::wait_with_deadline(run, Duration::from_secs(900), "interrupted run");
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "torchrun should restart the group and finish (killed pid {killed})\n{stdout}\n{stderr}");
    let resumed = stdout.lines().find(|l| l.contains("resuming from")).unwrap_or_else(|| panic!("no resume in:\n{stdout}"));
    println!("killed rank 1 (pid {killed}); {resumed}");
    assert_eq!(read_records(&b.join("metrics.jsonl")).unwrap().len(), 2);

    let (ma, mb) = (model(&a), model(&b));
    let mut max = 0f64;
    for ((na, ta), (nb, tb)) in ma.iter().zip(&mb) {
        assert_eq!(na, nb);
        max = max.max((ta.to_kind(Kind::Double) - tb.to_kind(Kind::Double)).abs().max().double_value(&[]));
    }
    println!("final weights, interrupted vs uninterrupted: max |diff| {max:e}");
    assert!(max <= 1e-6, "max |diff| {max}");
}
