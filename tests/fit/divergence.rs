//! A run whose weights diverge stops at the end of the epoch whose mean training loss is not
//! finite, with `Error::Diverged` naming the epoch, before validating it: no metrics record and
//! no final weights are written for a NaN model; a sane learning rate trains on.
use crate::common;

use tch::nn::VarStore;
use tch::Device;
use trainbook::dist::Dist;
use trainbook::fit::Trainer;
use trainbook::models::MnistNet;
use trainbook::train::{read_records, Optimizer};
use trainbook::Error;

/// libtorch's random generator is shared by the test threads: one run at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn run(out: &std::path::Path, lr: f64) -> trainbook::Result<trainbook::fit::FitReport> {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dist = Dist::single(Device::Cpu);
    tch::manual_seed(5);
    let mut vs = VarStore::new(Device::Cpu);
    let net = MnistNet::new(&vs.root());
    let mut opt = Optimizer::sgd(&vs, lr, 0.9);
    let (mut train, mut val) =
        (common::random_mnist_loader(1, 40), common::random_mnist_loader(2, 8));
    Trainer::new(&dist)
        .epochs(2)
        .out(out)
        .progress(false)
        .fit(&mut vs, &net, &mut opt, &mut train, &mut val)
}

#[test]
fn a_diverging_run_stops_after_the_epoch_whose_loss_is_not_finite() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("divergence");
    let err = run(&work.join("diverged"), 1e12).unwrap_err();
    let Error::Diverged { epoch, loss } = err else { panic!("not Diverged: {err}") };
    assert_eq!(epoch, 1, "{err}");
    assert!(!loss.is_finite(), "{err}");
    let text = err.to_string();
    assert!(text.starts_with("training diverged: the mean training loss of epoch 1 is "), "{text}");
    assert!(
        !work.join("diverged/metrics.jsonl").exists()
            || read_records(&work.join("diverged/metrics.jsonl")).unwrap().is_empty()
    );
    assert!(!work.join("diverged/model.safetensors").exists());

    let report = run(&work.join("sane"), 0.01).unwrap();
    assert_eq!(report.history.len(), 2);
    assert!(report.history.iter().all(|r| r.train_loss.is_finite()));
}
