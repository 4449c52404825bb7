//! The two-input example (examples/mnist_two_inputs.rs: a step of its own, `TrainStep`, over an
//! MNIST picture and a number given as an extra input, learning whether the digit is greater)
//! against the same loop written in PyTorch (tests/oracle/two_inputs.py), from the same initial
//! weights (PyTorch's own initialisation, loaded with --initial-weights), on the same 512
//! training and 256 test pictures in the same shuffled order, with the same dropout stream, one
//! thread each: every epoch's training loss and accuracy and validation loss and accuracy are
//! equal bit for bit, and so are the final weights (the same libtorch kernels in the same order
//! on both sides). Then the example stopped by SIGTERM after a mid-epoch checkpoint (exit status
//! 99) and run again resumes and ends with the uninterrupted run's weights and figures, bit for
//! bit; a third run loads its batches with two worker threads and ends on the same weights.
use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use trainbook::train::{read_records, EpochRecord};

const SEED: &str = "3";
const EPOCHS: &str = "2";
const BATCH: &str = "32";
const LR: &str = "0.001";
const TRAIN_N: &str = "512";
const TEST_N: &str = "256";

/// The example's command line for a run into `out` (one thread, loading in the main thread
/// unless `extra` says otherwise).
fn example(data: &Path, init: &Path, out: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(common::target_exe("examples/mnist_two_inputs"));
    cmd.arg("--data")
        .arg(data)
        .arg("--initial-weights")
        .arg(init)
        .arg("--out")
        .arg(out)
        .args(["--seed", SEED, "--epochs", EPOCHS, "--batch-size", BATCH, "--lr", LR])
        .args(["--train-limit", TRAIN_N, "--test-limit", TEST_N])
        .args(if extra.contains(&"--workers") { &[][..] } else { &["--workers", "0"][..] })
        .args(extra)
        .env("OMP_NUM_THREADS", "1");
    cmd
}

/// Every figure of an epoch that does not depend on time.
fn figures(r: &EpochRecord) -> [Option<f64>; 4] {
    [Some(r.train_loss), Some(r.train_acc), r.val_loss, r.val_acc]
}

#[test]
fn the_two_input_example_trains_as_pytorch_does_and_resumes_exactly() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("two_inputs");
    let data = work.join("mnist");
    common::offline_mnist(&data);
    let oracle = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/two_inputs.py");
    let python = || {
        let mut cmd = Command::new(common::venv_bin("python"));
        cmd.arg(&oracle).env("OMP_NUM_THREADS", "1");
        cmd
    };
    let ok = python().arg("init").arg(&*work).arg(SEED).status().unwrap();
    assert!(ok.success(), "two_inputs.py init");
    let init = work.join("init.safetensors");

    // trainbook's run and PyTorch's.
    let whole = work.join("whole");
    let out = common::run_with_deadline(
        &mut example(&data, &init, &whole, &[]),
        Duration::from_secs(600),
        "examples/mnist_two_inputs",
    );
    let stdout = common::text(&out);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("test accuracy"), "{stdout}");
    let args = [SEED, EPOCHS, BATCH, LR, TRAIN_N, TEST_N];
    let ok = python().arg("train").arg(&data).arg(&*work).args(args).status().unwrap();
    assert!(ok.success(), "two_inputs.py train");

    let ours = read_records(&whole.join("metrics.jsonl")).unwrap();
    let text = std::fs::read_to_string(work.join("torch.json")).unwrap();
    let theirs: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    assert_eq!(ours.len(), theirs.len());
    for (r, t) in ours.iter().zip(&theirs) {
        let names = ["train_loss", "train_acc", "val_loss", "val_acc"];
        let expected = names.map(|n| t[n].as_f64());
        assert_eq!(figures(r), expected, "epoch {}: {names:?}", r.epoch + 1);
    }
    println!("epochs (trainbook = PyTorch): {:?}", ours.iter().map(figures).collect::<Vec<_>>());
    // It learned: the test loss of the last epoch is below the first's.
    assert!(ours[1].val_loss < ours[0].val_loss, "{ours:?}");
    common::assert_same_weights(
        &whole.join("model.safetensors"),
        &work.join("torch.safetensors"),
        "trainbook's two-input run vs PyTorch's",
    );

    // Stopped by SIGTERM after its first mid-epoch checkpoint, then run again.
    let stopped = work.join("stopped");
    let extra = ["--save-every-steps", "3"];
    common::sigterm::stop_and_resume(|| example(&data, &init, &stopped, &extra), &stopped);
    let resumed = read_records(&stopped.join("metrics.jsonl")).unwrap();
    let mine: Vec<_> = resumed.iter().map(figures).collect();
    assert_eq!(mine, ours.iter().map(figures).collect::<Vec<_>>(), "the resumed run's epochs");
    common::assert_same_weights(
        &whole.join("model.safetensors"),
        &stopped.join("model.safetensors"),
        "the stopped and resumed two-input run vs the uninterrupted one",
    );

    // The extra inputs stacked by two worker threads: the same batches, the same run.
    let threads = work.join("threads");
    let out = common::run_with_deadline(
        &mut example(&data, &init, &threads, &["--workers", "2"]),
        Duration::from_secs(600),
        "the run with two loader threads",
    );
    assert!(out.status.success(), "{}", common::text(&out));
    common::assert_same_weights(
        &whole.join("model.safetensors"),
        &threads.join("model.safetensors"),
        "the two-input run with two loader threads vs the one without",
    );
}
