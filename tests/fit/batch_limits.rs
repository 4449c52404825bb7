//! `Trainer::limit_batches` (Lightning's `limit_train_batches` / `limit_val_batches`): each
//! epoch trains on its first N batches and validates on its first M, a resumed run keeps the
//! limit, and the caller's loaders get their own lengths back after the run; `max_steps` ends a
//! run mid-epoch (with gradient accumulation) and a resumed run continues to a larger one;
//! `overfit_batches` trains and validates on the first batches in order, every epoch.
use crate::common;

use std::sync::{Arc, Mutex};

use tch::nn::VarStore;
use tch::Device;
use trainbook::dist::Dist;
use trainbook::fit::{Callback, Trainer};
use trainbook::models::MnistNet;
use trainbook::trail::read_trail;
use trainbook::train::{EpochSummary, Optimizer};

/// libtorch's random generator is shared by the test threads: one run at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// The samples each epoch trained and validated on.
#[derive(Default)]
struct Samples(Vec<(u64, u64)>);

impl Callback for Samples {
    fn on_train_epoch_end(&mut self, _: u64, t: &EpochSummary, _: u64) -> trainbook::Result<()> {
        self.0.push((t.samples, 0));
        Ok(())
    }
    fn on_validation_epoch_end(
        &mut self,
        _: u64,
        v: &EpochSummary,
        _: u64,
    ) -> trainbook::Result<()> {
        self.0.last_mut().unwrap().1 = v.samples;
        Ok(())
    }
}

#[test]
fn each_epoch_trains_and_validates_on_its_first_batches_and_the_loaders_get_their_lengths_back() {
    let _turn = common::module_turn(module_path!());
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new("batch-limits");
    let dist = Dist::single(Device::Cpu);
    let (mut train, mut val) =
        (common::random_mnist_loader(1, 40), common::random_mnist_loader(2, 8)); // 10 and 2 batches of 4
    for epochs in [2, 3] {
        // The second call resumes from the first's last checkpoint and trains epoch 3.
        tch::manual_seed(3);
        let mut vs = VarStore::new(Device::Cpu);
        let net = MnistNet::new(&vs.root());
        let mut opt = Optimizer::sgd(&vs, 0.01, 0.9);
        let samples = Arc::new(Mutex::new(Samples::default()));
        Trainer::new(&dist)
            .epochs(epochs)
            .out(work.join("run"))
            .progress(false)
            .limit_batches(Some(3), Some(1))
            .weight_trail(1)
            .callback(samples.clone())
            .fit(&mut vs, &net, &mut opt, &mut train, &mut val)
            .unwrap();
        let seen = std::mem::take(&mut samples.lock().unwrap().0);
        assert_eq!(seen, vec![(12, 4); if epochs == 2 { 2 } else { 1 }]);
        assert_eq!((train.len(), val.len(), train.batch_limit()), (10, 2, None));
    }
    let trail = read_trail(work.join("run")).unwrap();
    let at: Vec<(u64, u64, u64)> =
        trail.steps.iter().map(|s| (s.step, s.epoch, s.batches_done)).collect();
    let want: Vec<(u64, u64, u64)> =
        (0..3).flat_map(|e| (1..=3).map(move |b| (e * 3 + b, e, b))).collect();
    assert_eq!(at, want, "3 steps per epoch, the third epoch after the resume");
}

#[test]
fn max_steps_ends_the_run_mid_epoch_and_a_resume_has_nothing_left() {
    let _turn = common::module_turn(module_path!());
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new("max-steps");
    let dist = Dist::single(Device::Cpu);
    // 6 batches of 4 per epoch; accumulating 2 batches per step: 3 steps per epoch.
    let (mut train, mut val) =
        (common::random_mnist_loader(1, 24), common::random_mnist_loader(2, 8));
    for (round, max) in [(0, 4u64), (1, 4), (2, 5)] {
        tch::manual_seed(3);
        let mut vs = VarStore::new(Device::Cpu);
        let net = MnistNet::new(&vs.root());
        let mut opt = Optimizer::sgd(&vs, 0.01, 0.9);
        let samples = Arc::new(Mutex::new(Samples::default()));
        let report = Trainer::new(&dist)
            .epochs(10)
            .out(work.join("run"))
            .progress(false)
            .accumulate(2)
            .max_steps(Some(max))
            .weight_trail(1)
            .callback(samples.clone())
            .fit(&mut vs, &net, &mut opt, &mut train, &mut val)
            .unwrap();
        let seen = std::mem::take(&mut samples.lock().unwrap().0);
        match round {
            // Epoch 1: 3 steps (24 samples); epoch 2: the 4th step, 2 batches (8 samples).
            0 => assert_eq!(seen, [(24, 8), (8, 8)]),
            // Resumed with the same max_steps: nothing to train, the history as it was.
            1 => assert_eq!((seen.len(), report.history.len()), (0, 2)),
            // Resumed with one more step: epoch 3 trains it (2 batches) and the run ends.
            _ => assert_eq!((seen, report.history.len()), (vec![(8, 8)], 3)),
        }
        assert_eq!((train.len(), train.batch_limit()), (6, None));
    }
    let trail = read_trail(work.join("run")).unwrap();
    let at: Vec<(u64, u64, u64)> =
        trail.steps.iter().map(|s| (s.step, s.epoch, s.batches_done)).collect();
    assert_eq!(at, [(1, 0, 2), (2, 0, 4), (3, 0, 6), (4, 1, 2), (5, 2, 2)]);
    let zero = Trainer::new(&dist).out(work.join("zero")).max_steps(Some(0)).progress(false);
    let mut vs = VarStore::new(Device::Cpu);
    let net = MnistNet::new(&vs.root());
    let mut opt = Optimizer::sgd(&vs, 0.01, 0.9);
    let err = zero.fit(&mut vs, &net, &mut opt, &mut train, &mut val).unwrap_err();
    assert!(err.to_string().contains("max_steps: 0"), "{err}");
}

#[test]
fn a_fast_dev_run_trains_a_few_batches_once_and_writes_nothing_where_out_points() {
    let _turn = common::module_turn(module_path!());
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new("fast-dev-run");
    let dist = Dist::single(Device::Cpu);
    let (mut train, mut val) =
        (common::random_mnist_loader(1, 24), common::random_mnist_loader(2, 16));
    tch::manual_seed(3);
    let mut vs = VarStore::new(Device::Cpu);
    let net = MnistNet::new(&vs.root());
    let mut opt = Optimizer::sgd(&vs, 0.01, 0.9);
    let samples = Arc::new(Mutex::new(Samples::default()));
    let trainer = Trainer::new(&dist)
        .epochs(5)
        .out(work.join("run"))
        .progress(false)
        .weight_trail(1)
        .fast_dev_run(Some(2))
        .callback(samples.clone());
    for _ in 0..2 {
        // Twice: the second run does not resume the first (nothing of it was kept).
        let report = trainer.fit(&mut vs, &net, &mut opt, &mut train, &mut val).unwrap();
        assert_eq!((report.history.len(), report.resumed_from.is_none()), (1, true));
        assert_eq!(std::mem::take(&mut samples.lock().unwrap().0), [(8, 8)]);
    }
    assert!(!work.join("run").exists(), "nothing is written where --out points");
    assert_eq!((train.len(), val.len(), train.batch_limit()), (6, 4, None));
    let err = Trainer::new(&dist).out(work.join("zero")).fast_dev_run(Some(0)).progress(false);
    let err = err.fit(&mut vs, &net, &mut opt, &mut train, &mut val).unwrap_err();
    assert!(err.to_string().contains("fast_dev_run: 0"), "{err}");
}

#[test]
fn overfit_batches_trains_the_first_batches_in_order_and_gives_the_shuffle_back() {
    let _turn = common::module_turn(module_path!());
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new("overfit-batches");
    let dist = Dist::single(Device::Cpu);
    let run = |out: &str, overfit: bool| {
        tch::manual_seed(3);
        let mut vs = VarStore::new(Device::Cpu);
        let net = MnistNet::new(&vs.root());
        let mut opt = Optimizer::sgd(&vs, 0.05, 0.9);
        // Shuffled loaders: overfit_batches turns the shuffle off; the other run never had it.
        let (mut train, mut val) =
            (common::random_mnist_loader(1, 24), common::random_mnist_loader(2, 16));
        let (mut train, mut val) = if overfit {
            (train.shuffle(true), val.shuffle(true))
        } else {
            train.set_shuffle(false);
            val.set_shuffle(false);
            (train, val)
        };
        let samples = Arc::new(Mutex::new(Samples::default()));
        let trainer = Trainer::new(&dist).epochs(3).out(work.join(out)).progress(false);
        let trainer = if overfit {
            trainer.overfit_batches(Some(2))
        } else {
            trainer.limit_batches(Some(2), Some(2))
        };
        tch::manual_seed(9);
        trainer
            .callback(samples.clone())
            .fit(&mut vs, &net, &mut opt, &mut train, &mut val)
            .unwrap();
        assert_eq!(train.is_shuffled(), overfit, "the loader's own shuffle is back");
        assert_eq!(train.len(), 6, "and its own length");
        let seen = std::mem::take(&mut samples.lock().unwrap().0);
        seen
    };
    let overfit = run("overfit", true);
    assert_eq!(overfit, [(8, 8), (8, 8), (8, 8)], "2 batches of 4 each epoch, both ways");
    assert_eq!(run("in-order", false), overfit);
    common::assert_same_weights(
        &work.join("overfit/model.safetensors"),
        &work.join("in-order/model.safetensors"),
        "overfit_batches trains the first 2 batches in order, as limit_batches without shuffle",
    );
}
