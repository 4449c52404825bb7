//! Early stopping and the monitored metric in `Trainer::fit` (Lightning's `EarlyStopping` and
//! `monitor`): a run whose validation loss stops improving stops after `patience` epochs and
//! stays finished when run again; the wait is in the checkpoints, so a run continued from one
//! stops where an uninterrupted run does; `monitor` makes `best/` and early stopping judge by
//! the same metric; `restore_best` leaves the model with `best/`'s weights; bad settings are
//! errors naming them, before any training.
use crate::common;

use std::path::Path;

use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};
use trainbook::checkpoint::Policy;
use trainbook::data::{DataLoader, TensorDataset};
use trainbook::dist::Dist;
use trainbook::fit::{EarlyStopping, FitReport, Trainer};
use trainbook::models::MnistNet;
use trainbook::train::{Mode, Monitor, Optimizer};

fn loader(seed: i64) -> DataLoader<TensorDataset> {
    tch::manual_seed(seed);
    let x = Tensor::randn([24, 1, 28, 28], (Kind::Float, Device::Cpu));
    let y = Tensor::randint(10, [24], (Kind::Int64, Device::Cpu));
    let names = (0..10).map(|c| c.to_string()).collect();
    DataLoader::new(TensorDataset::new(&x, &y, names).unwrap(), 8).num_workers(0)
}

/// A run of at most `epochs` epochs at learning rate `lr` (0: the validation loss never
/// changes), resuming from `out` when a checkpoint is there.
fn fit(out: &Path, epochs: u64, lr: f64, trainer: fn(Trainer) -> Trainer) -> FitReport {
    let dist = Dist::single(Device::Cpu);
    tch::manual_seed(3);
    let mut vs = VarStore::new(Device::Cpu);
    let net = MnistNet::new(&vs.root());
    let mut opt = Optimizer::sgd(&vs, lr, 0.9);
    let (mut train, mut val) = (loader(1), loader(2));
    trainer(Trainer::new(&dist).epochs(epochs).out(out).progress(false))
        .fit(&mut vs, &net, &mut opt, &mut train, &mut val)
        .unwrap()
}

/// Early stopping on the validation loss with patience 2.
fn early(t: Trainer) -> Trainer {
    t.early_stopping(EarlyStopping::new(Monitor::ValLoss, 2))
}

#[test]
fn a_run_stops_when_the_loss_stops_improving_and_stays_stopped() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("early-stop");
    let report = fit(&work, 10, 0.0, early);
    // Epoch 1 sets the best; epochs 2 and 3 do not improve on it: stop after epoch 3.
    assert_eq!((report.history.len(), report.early_stopped), (3, Some(2)));
    let again = fit(&work, 10, 0.0, early);
    assert_eq!((again.history.len(), again.early_stopped), (3, Some(2)), "nothing more trained");
    assert!(again.resumed_from.is_some());
}

#[test]
fn the_wait_is_in_the_checkpoints() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("early-stop-resume");
    // Two epochs: the second did not improve (waited 1 of 2), the run ended on its epochs.
    let first = fit(&work, 2, 0.0, early);
    assert_eq!((first.history.len(), first.early_stopped), (2, None));
    // Continued with more epochs: one more epoch without improvement stops it, as in the
    // uninterrupted run (a fresh wait would train two more).
    let more = fit(&work, 10, 0.0, early);
    assert_eq!((more.history.len(), more.early_stopped), (3, Some(2)));
}

#[test]
fn monitor_makes_best_and_early_stopping_judge_by_one_metric() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("monitor");
    let report = fit(&work, 4, 0.05, |t| {
        let policy = Policy { every_epochs: Some(1), every_steps: None, keep_last: 1, best: None };
        t.policy(policy).keep_best(Some(Mode::Min)).monitor(Monitor::ValAcc)
    });
    let best_acc = report.history.iter().filter_map(|r| r.val_acc).fold(f64::MIN, f64::max);
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(work.join("checkpoints/best/manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["best_metric"].as_f64(), Some(best_acc), "best/ kept by accuracy");
    assert_eq!(report.best_val_acc, Some(best_acc));

    let bad = std::panic::catch_unwind(|| {
        fit(&work.join("bad"), 1, 0.05, |t| {
            t.early_stopping(EarlyStopping::new(Monitor::ValAcc, 0))
        })
    });
    let message = bad.unwrap_err();
    let text = message
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| message.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(text.contains("early stopping: patience must be at least 1"), "{text}");
    assert!(!work.join("bad/metrics.jsonl").exists(), "refused before any training");
}

#[test]
fn restore_best_leaves_the_model_with_the_best_epochs_weights() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("restore-best");
    // Learning rate 0.3: accuracy goes up and down, so the best epoch is rarely the last.
    let report = fit(&work, 4, 0.3, |t| t.monitor(Monitor::ValLoss).restore_best(true));
    let best = work.join("checkpoints/best/model.safetensors");
    common::assert_same_weights(&work.join("model.safetensors"), &best, "restored best/");
    let best_loss = report.history.iter().filter_map(|r| r.val_loss).fold(f64::MAX, f64::min);
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(work.join("checkpoints/best/manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["best_metric"].as_f64(), Some(best_loss));
    // Without it the model is the last epoch's: different from best/ unless the last was best.
    let last = common::WorkDir::new("restore-best-off");
    let plain = fit(&last, 4, 0.3, |t| t.monitor(Monitor::ValLoss));
    // (Judged by this run's own history: the tests of this file run in parallel and share
    // libtorch's random stream, so two runs need not follow the same trajectory.)
    let plain_best = plain.history.iter().filter_map(|r| r.val_loss).fold(f64::MAX, f64::min);
    let last_is_best = plain.history.last().and_then(|r| r.val_loss) == Some(plain_best);
    if !last_is_best {
        let same = std::panic::catch_unwind(|| {
            common::assert_same_weights(
                &last.join("model.safetensors"),
                &last.join("checkpoints/best/model.safetensors"),
                "last vs best",
            )
        });
        assert!(same.is_err(), "the last epoch's weights differ from best/'s");
    }
}
