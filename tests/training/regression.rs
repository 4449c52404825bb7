//! The regression example (examples/mnist_regression.rs: the MNIST CNN with one output learns
//! each digit's value under a mean squared error) against the same loop written in PyTorch
//! (tests/oracle/regression.py), from the same initial weights (PyTorch's own initialisation,
//! loaded with --initial-weights), on the same 512 training and 256 test pictures in the same
//! shuffled order, with the same dropout stream, one thread each: every epoch's training loss,
//! MAE and RMSE and validation loss, MAE and RMSE are equal bit for bit, and so are the final
//! weights (the same libtorch kernels in the same order on both sides). Then the example
//! stopped by SIGTERM after a mid-epoch checkpoint (exit status 99) and run again resumes and
//! ends with the uninterrupted run's weights and figures, bit for bit: the regression sums of
//! the interrupted epoch come back from the checkpoint.
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

/// The example's command line for a run into `out` (one thread, loading in the main thread).
fn example(data: &Path, init: &Path, out: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(common::target_exe("examples/mnist_regression"));
    cmd.arg("--data")
        .arg(data)
        .arg("--initial-weights")
        .arg(init)
        .arg("--out")
        .arg(out)
        .args(["--seed", SEED, "--epochs", EPOCHS, "--batch-size", BATCH, "--lr", LR])
        .args(["--train-limit", TRAIN_N, "--test-limit", TEST_N, "--workers", "0"])
        .args(extra)
        .env("OMP_NUM_THREADS", "1");
    cmd
}

/// Every figure of an epoch that does not depend on time.
fn figures(r: &EpochRecord) -> [Option<f64>; 6] {
    [Some(r.train_loss), r.train_mae, r.train_rmse, r.val_loss, r.val_mae, r.val_rmse]
}

#[test]
fn the_regression_example_trains_as_pytorch_does_and_resumes_exactly() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("regression");
    let data = work.join("mnist");
    common::offline_mnist(&data);
    let oracle = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/regression.py");
    let python = || {
        let mut cmd = Command::new(common::venv_bin("python"));
        cmd.arg(&oracle).env("OMP_NUM_THREADS", "1");
        cmd
    };
    let ok = python().arg("init").arg(&*work).arg(SEED).status().unwrap();
    assert!(ok.success(), "regression.py init");
    let init = work.join("init.safetensors");

    // trainbook's run and PyTorch's.
    let whole = work.join("whole");
    let out = common::run_with_deadline(
        &mut example(&data, &init, &whole, &[]),
        Duration::from_secs(600),
        "examples/mnist_regression",
    );
    let stdout = common::text(&out);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("mae") && stdout.contains("mean absolute error"), "{stdout}");
    let args = [SEED, EPOCHS, BATCH, LR, TRAIN_N, TEST_N];
    let ok = python().arg("train").arg(&data).arg(&*work).args(args).status().unwrap();
    assert!(ok.success(), "regression.py train");

    let ours = read_records(&whole.join("metrics.jsonl")).unwrap();
    let text = std::fs::read_to_string(work.join("torch.json")).unwrap();
    let theirs: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    assert_eq!(ours.len(), theirs.len());
    for (r, t) in ours.iter().zip(&theirs) {
        let names = ["train_loss", "train_mae", "train_rmse", "val_loss", "val_mae", "val_rmse"];
        let expected = names.map(|n| t[n].as_f64());
        assert_eq!(figures(r), expected, "epoch {}: {names:?}", r.epoch + 1);
        assert!(r.val_acc.is_none() && r.train_acc.is_nan(), "no accuracy for a regression");
    }
    println!("epochs (trainbook = PyTorch): {:?}", ours.iter().map(figures).collect::<Vec<_>>());
    // It learned: the test error of the last epoch is below the first's.
    assert!(ours[1].val_mae < ours[0].val_mae, "{ours:?}");
    common::assert_same_weights(
        &whole.join("model.safetensors"),
        &work.join("torch.safetensors"),
        "trainbook's regression run vs PyTorch's",
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
        "the stopped and resumed regression run vs the uninterrupted one",
    );
}
