//! A callback of one's own that keeps state (`Callback::state_key`) is one of the run's parts:
//! its state is in every checkpoint under its key, and a resumed run puts it back before
//! `on_fit_start`, so the callback ends as it would have without the interruption, bit for bit.
//! A checkpoint without its state starts it fresh. Two parts under one key (two callbacks, or a
//! callback and a built-in part) and a key that is not a key are refused by name before anything
//! trains.
use crate::common;

use std::path::Path;
use std::sync::{Arc, Mutex};

use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};
use trainbook::data::{DataLoader, TensorDataset};
use trainbook::dist::Dist;
use trainbook::fit::{Callback, FitReport, FitStart, Trainer};
use trainbook::models::MnistNet;
use trainbook::train::{EpochSummary, Optimizer, StepLR};
use trainbook::PartState;

/// libtorch's random generator is shared by the test threads and these runs are exact only
/// with its stream to themselves: one run at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Sums every epoch's training loss and counts the epochs (its state, under `key`), and
/// remembers what it held when the run started.
#[derive(Debug, Default)]
struct LossSum {
    key: String,
    epochs: u64,
    sum: f64,
    at_start: Option<(u64, f64)>,
}

impl LossSum {
    fn shared(key: &str) -> Arc<Mutex<LossSum>> {
        Arc::new(Mutex::new(LossSum { key: key.into(), ..Default::default() }))
    }
}

impl Callback for LossSum {
    fn on_fit_start(&mut self, _start: &FitStart) -> trainbook::Result<()> {
        self.at_start = Some((self.epochs, self.sum));
        Ok(())
    }
    fn on_train_epoch_end(
        &mut self,
        _epoch: u64,
        train: &EpochSummary,
        _steps_done: u64,
    ) -> trainbook::Result<()> {
        self.epochs += 1;
        self.sum += train.loss;
        Ok(())
    }
    fn state_key(&self) -> Option<String> {
        Some(self.key.clone())
    }
    fn state_dict(&self) -> trainbook::Result<PartState> {
        PartState::of_serde(&(self.epochs, self.sum))
    }
    fn load_state_dict(&mut self, state: PartState) -> trainbook::Result<()> {
        (self.epochs, self.sum) = state.parse(&self.key)?;
        Ok(())
    }
}

fn data(seed: i64, n: i64) -> TensorDataset {
    tch::manual_seed(seed);
    let x = Tensor::randn([n, 1, 28, 28], (Kind::Float, Device::Cpu));
    let y = Tensor::randint(10, [n], (Kind::Int64, Device::Cpu));
    TensorDataset::new(&x, &y, (0..10).map(|c| c.to_string()).collect()).unwrap()
}

/// Callbacks shared with the test, which reads them after the run.
type Shared = Vec<Arc<Mutex<LossSum>>>;

/// `epochs` epochs of the MNIST CNN into `out` (resuming from its last checkpoint with
/// `resume`), with `callbacks` and, with `schedule`, a StepLR (whose part's key is `schedule`).
fn fit(
    out: &Path,
    epochs: u64,
    resume: bool,
    callbacks: &[Arc<Mutex<LossSum>>],
    schedule: bool,
) -> trainbook::Result<FitReport> {
    let mut train = DataLoader::new(data(1, 16), 4).shuffle(true).num_workers(0);
    let mut val = DataLoader::new(data(2, 8), 4).num_workers(0);
    tch::manual_seed(0);
    let mut vs = VarStore::new(Device::Cpu);
    let net = MnistNet::new(&vs.root());
    let mut opt = Optimizer::sgd(&vs, 0.05, 0.9);
    let dist = Dist::single(Device::Cpu);
    let mut trainer =
        Trainer::new(&dist).epochs(epochs).out(out).resume(resume).progress(false).seed(3);
    if schedule {
        trainer = trainer.schedule(StepLR::new(1, 0.5));
    }
    for c in callbacks {
        trainer = trainer.callback(c.clone());
    }
    trainer.fit(&mut vs, &net, &mut opt, &mut train, &mut val)
}

#[test]
fn a_callbacks_state_survives_a_resume_bit_for_bit() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new("callback-state-resume");

    let whole = LossSum::shared("loss_sum");
    fit(&work.join("whole"), 3, false, std::slice::from_ref(&whole), true).unwrap();

    let first = LossSum::shared("loss_sum");
    fit(&work.join("split"), 2, false, std::slice::from_ref(&first), true).unwrap();
    let (epochs, sum) = {
        let f = first.lock().unwrap();
        (f.epochs, f.sum)
    };
    assert_eq!(epochs, 2);
    // The state is in the checkpoint, under its key.
    let ckpts = work.join("split/checkpoints");
    let manifests: Vec<String> = std::fs::read_dir(&ckpts)
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.unwrap().path().join("manifest.json")).ok())
        .collect();
    assert!(!manifests.is_empty(), "no checkpoint in {}", ckpts.display());
    assert!(manifests.iter().all(|m| m.contains("\"loss_sum\"")), "{manifests:?}");

    let second = LossSum::shared("loss_sum");
    fit(&work.join("split"), 3, true, std::slice::from_ref(&second), true).unwrap();
    let (whole, second) = (whole.lock().unwrap(), second.lock().unwrap());
    let at_start = second.at_start.expect("on_fit_start ran");
    assert_eq!(at_start.0, epochs, "put back before on_fit_start");
    assert_eq!(at_start.1.to_bits(), sum.to_bits(), "the sum comes back to the last bit");
    assert_eq!(second.epochs, whole.epochs);
    assert_eq!(
        second.sum.to_bits(),
        whole.sum.to_bits(),
        "resumed {} vs uninterrupted {}",
        second.sum,
        whole.sum
    );
}

#[test]
fn a_checkpoint_without_the_callbacks_state_starts_it_fresh() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new("callback-state-fresh");
    fit(&work.join("run"), 1, false, &[], false).unwrap();
    let late = LossSum::shared("loss_sum");
    fit(&work.join("run"), 2, true, std::slice::from_ref(&late), false).unwrap();
    let late = late.lock().unwrap();
    assert_eq!(late.at_start, Some((0, 0.0)));
    assert_eq!(late.epochs, 1, "only the epoch it saw");
}

#[test]
fn two_parts_under_one_key_and_a_bad_key_are_refused_by_name() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new("callback-state-keys");
    let cases: [(&str, Shared, bool, &str); 3] = [
        (
            "twice",
            vec![LossSum::shared("loss_sum"), LossSum::shared("loss_sum")],
            false,
            "`loss_sum`",
        ),
        ("built_in", vec![LossSum::shared("schedule")], true, "`schedule`"),
        ("bad", vec![LossSum::shared("Loss Sum")], false, "\"Loss Sum\""),
    ];
    for (name, callbacks, schedule, named) in cases {
        let out = work.join(name);
        let err = fit(&out, 1, false, &callbacks, schedule).unwrap_err().to_string();
        assert!(err.contains(named), "{name}: {err}");
        assert!(err.contains("callback"), "{name}: the error says it is a callback's key: {err}");
        assert!(!out.join("checkpoints").exists(), "{name}: nothing trained, nothing written");
        assert!(callbacks.iter().all(|c| c.lock().unwrap().at_start.is_none()), "{name}");
    }
}
