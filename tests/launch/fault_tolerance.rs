//! The headline: the MNIST example under `torchrun --nproc-per-node=2 --max-restarts=1`, one
//! worker SIGKILLed after the first checkpoint; torchrun restarts the group, the run resumes
//! mid-epoch from the checkpoint and ends with exactly the weights of an uninterrupted run
//! (every tensor of `model.safetensors` equal bit for bit).
//!
//! Pre-emption without Slurm: SIGTERM to torchrun's agent once the first checkpoint exists (one
//! epoch); the agent passes it on to its workers, which agree to stop at the next step, write a
//! checkpoint and exit with status 99; the same command run again resumes from it and ends on
//! the weights of an uninterrupted run, bit for bit.
use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use trainbook::train::read_records;

const ARGS: [&str; 6] = ["--epochs", "2", "--save-every-steps", "20", "--workers", "1"];

fn torchrun(out: &Path, data: &Path, restarts: u32) -> Command {
    torchrun_with(out, data, restarts, &ARGS)
}

fn torchrun_with(out: &Path, data: &Path, restarts: u32, args: &[&str]) -> Command {
    let mut cmd = Command::new(common::venv_bin("torchrun"));
    cmd.args([
        "--standalone",
        "--nproc-per-node=2",
        &format!("--max-restarts={restarts}"),
        "--no-python",
    ])
    .arg(common::target_exe("examples/mnist"))
    .args(args)
    .arg("--out")
    .arg(out)
    .arg("--data")
    .arg(data)
    .env("TRAINBOOK_DIST_TIMEOUT", "60");
    cmd
}

#[test]
fn killed_worker_resumes_to_identical_weights() {
    let _turn = common::module_turn(module_path!());
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

    // The same run, with rank 1 killed once the first checkpoint exists; with RUST_BACKTRACE=1,
    // as a notebook's programs have it (evcxr sets it), so that a backtrace would show.
    let mut run = torchrun(&b, &data, 1)
        .env("RUST_BACKTRACE", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
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
    // Rank 0 may stop on its broken connection before torchrun ends it: then it says so in one
    // line (examples/common's exit_status), never with a backtrace or Gloo's message alone.
    let text = format!("{stdout}\n{stderr}");
    assert!(!text.contains("Stack backtrace") && !text.contains("rust_begin_unwind"), "{text}");
    for line in text.lines().filter(|l| l.contains("by peer") || l.contains("mnist: rank")) {
        println!("the surviving rank said: {line}");
        assert!(
            line.starts_with("mnist: rank 0 of 2 stopped: the connection to another rank broke"),
            "{line}"
        );
        assert!(line.contains("torchrun restarts every rank"), "{line}");
    }
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

/// One epoch: the first checkpoint at step 20 of 63.
const ONE_EPOCH: [&str; 6] = ["--epochs", "1", "--save-every-steps", "20", "--workers", "1"];

#[test]
fn sigterm_to_torchrun_then_rerun_ends_on_identical_weights() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("sigterm");
    let data = work.join("mnist");
    common::offline_mnist(&data);
    let (a, b) = (work.join("uninterrupted"), work.join("preempted"));
    let o = common::run_with_deadline(
        &mut torchrun_with(&a, &data, 0, &ONE_EPOCH),
        Duration::from_secs(900),
        "uninterrupted run",
    );
    assert!(o.status.success(), "{}", common::text(&o));

    let mut run = torchrun_with(&b, &data, 0, &ONE_EPOCH)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ckpts = b.join("checkpoints");
    let start = std::time::Instant::now();
    while !std::fs::read_dir(&ckpts)
        .is_ok_and(|d| d.flatten().any(|e| e.path().join("manifest.json").exists()))
    {
        assert!(run.try_wait().unwrap().is_none(), "the run ended before the signal");
        assert!(start.elapsed() < Duration::from_secs(600), "no checkpoint in 600 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: SIGTERM to the torchrun agent this test started.
    unsafe { libc::kill(run.id() as i32, libc::SIGTERM) };
    let o = common::wait_with_deadline(run, Duration::from_secs(300), "preempted run");
    let text = common::text(&o);
    assert!(!o.status.success(), "torchrun ends in failure after SIGTERM\n{text}");
    let line = text
        .lines()
        .find(|l| l.contains("interrupted (SIGTERM"))
        .unwrap_or_else(|| panic!("no stop by SIGTERM in:\n{text}"));
    println!("after SIGTERM to torchrun: {line}");
    assert!(text.contains("exit status 99"), "{text}");
    assert!(!b.join("model.safetensors").exists(), "a stopped run writes no final model");
    let said_wrote = text.contains("model.safetensors, checkpoints/}");
    assert!(!said_wrote, "a stopped run says it wrote no final files:\n{text}");

    let o = common::run_with_deadline(
        &mut torchrun_with(&b, &data, 0, &ONE_EPOCH),
        Duration::from_secs(900),
        "rerun",
    );
    let text = common::text(&o);
    assert!(o.status.success(), "{text}");
    assert!(text.contains("resuming from"), "{text}");
    common::assert_same_weights(
        &a.join("model.safetensors"),
        &b.join("model.safetensors"),
        "final weights, SIGTERM + rerun vs uninterrupted",
    );
}

/// Two ranks of the MNIST example started by hand with a torchrun worker's variables (no agent
/// to stop the survivor), rank 1 SIGKILLed once the first checkpoint exists: rank 0's next
/// all-reduce finds the connection broken, and it stops with one line on stderr that says which
/// rank it is, that the other rank's connection broke and what torchrun does next; no
/// backtrace, although RUST_BACKTRACE=1 (as evcxr sets it for a notebook's programs).
#[test]
fn a_surviving_rank_says_in_one_line_that_another_rank_died() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("peer-died");
    let (data, out) = (work.join("mnist"), work.join("run"));
    common::offline_mnist(&data);
    let port = trainbook::dist::free_port().unwrap().to_string();
    let rank = |r: &str| {
        Command::new(common::target_exe("examples/mnist"))
            .args(ARGS)
            .arg("--out")
            .arg(&out)
            .arg("--data")
            .arg(&data)
            .envs([("RANK", r), ("LOCAL_RANK", r), ("WORLD_SIZE", "2"), ("LOCAL_WORLD_SIZE", "2")])
            .envs([("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", port.as_str())])
            .envs([("TORCHELASTIC_RUN_ID", "peer-died"), ("RUST_BACKTRACE", "1")])
            .env("TRAINBOOK_DIST_TIMEOUT", "60")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (survivor, mut victim) = (rank("0"), rank("1"));
    let checkpoints = out.join("checkpoints");
    let started = std::time::Instant::now();
    let has_checkpoint = || {
        std::fs::read_dir(&checkpoints).is_ok_and(|d| {
            d.flatten().any(|e| e.file_name().to_string_lossy().starts_with("step-"))
        })
    };
    while !has_checkpoint() {
        assert!(started.elapsed() < Duration::from_secs(600), "no checkpoint in 10 minutes");
        std::thread::sleep(Duration::from_millis(50));
    }
    victim.kill().unwrap();
    let _ = victim.wait();
    let o = common::wait_with_deadline(survivor, Duration::from_secs(300), "the surviving rank");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{}", common::text(&o));
    let said: Vec<&str> = stderr.lines().filter(|l| l.starts_with("mnist: ")).collect();
    assert_eq!(said.len(), 1, "one line:\n{stderr}");
    println!("rank 0 said: {}", said[0]);
    assert!(
        said[0].starts_with(
            "mnist: rank 0 of 2 stopped: the connection to another rank broke during "
        ),
        "{stderr}"
    );
    assert!(
        said[0].contains("that rank exited or was killed; torchrun restarts every rank"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("Stack backtrace") && !stderr.contains("rust_begin_unwind"),
        "{stderr}"
    );
}
