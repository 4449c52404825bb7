//! `Trainer::val_every_steps` (Lightning's `val_check_interval` as a count): validations after
//! every n optimizer steps in the middle of epochs (not after a step that ends an epoch), each
//! equal to testing the weights of that step bit for bit, logged to `val_steps.jsonl` and
//! TensorBoard and handed to the callbacks, without changing the training: the final weights
//! equal a run without them bit for bit. (Resumed runs: `tests/fit/fit_resume.rs`.)
use crate::common;

use std::path::Path;
use std::sync::{Arc, Mutex};

use tch::nn::VarStore;
use tch::Device;
use trainbook::checkpoint::Policy;
use trainbook::dist::Dist;
use trainbook::fit::{Callback, Trainer};
use trainbook::models::MnistNet;
use trainbook::train::{EpochSummary, Optimizer};

/// libtorch's random generator is shared by the test threads: one run at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// The steps and losses of the mid-epoch validations a callback saw.
#[derive(Default)]
struct Seen(Vec<(u64, u64, f64)>);

impl Callback for Seen {
    fn on_step_validation(
        &mut self,
        epoch: u64,
        steps: u64,
        v: &EpochSummary,
    ) -> trainbook::Result<()> {
        self.0.push((epoch, steps, v.loss));
        Ok(())
    }
}

/// Two epochs of 6 steps (24 samples, batch 4), a checkpoint after every step.
fn fit(out: &Path, every: Option<u64>, seen: Arc<Mutex<Seen>>) {
    let dist = Dist::single(Device::Cpu);
    tch::manual_seed(3);
    let mut vs = VarStore::new(Device::Cpu);
    let net = MnistNet::new(&vs.root());
    let mut opt = Optimizer::sgd(&vs, 0.02, 0.9);
    let (mut train, mut val) =
        (common::random_mnist_loader(1, 24), common::random_mnist_loader(2, 12));
    let policy = Policy { every_epochs: None, every_steps: Some(1), keep_last: 20, best: None };
    tch::manual_seed(9);
    Trainer::new(&dist)
        .epochs(2)
        .out(out)
        .progress(false)
        .policy(policy)
        .val_every_steps(every)
        .callback(seen)
        .fit(&mut vs, &net, &mut opt, &mut train, &mut val)
        .unwrap();
}

#[test]
fn validations_every_n_steps_match_the_weights_of_their_step_and_change_nothing() {
    let _turn = common::module_turn(module_path!());
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new("val-every-steps");
    let seen = Arc::new(Mutex::new(Seen::default()));
    fit(&work.join("with"), Some(4), seen.clone());
    fit(&work.join("without"), None, Arc::new(Mutex::new(Seen::default())));
    // Steps 4 (epoch 0, 4 of 6 batches) and 8 (epoch 1, 2 of 6); step 12 ends epoch 1.
    let seen = std::mem::take(&mut seen.lock().unwrap().0);
    assert_eq!(seen.iter().map(|s| (s.0, s.1)).collect::<Vec<_>>(), [(0, 4), (1, 8)]);
    common::assert_same_weights(
        &work.join("with/model.safetensors"),
        &work.join("without/model.safetensors"),
        "the mid-epoch validations changed the training",
    );
    assert!(!work.join("without/val_steps.jsonl").exists());
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(work.join("with/val_steps.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    // Each equals testing that step's weights (its checkpoint) on the validation set.
    let dist = Dist::single(Device::Cpu);
    for (line, &(_, step, loss)) in lines.iter().zip(&seen) {
        assert_eq!(line["step"].as_u64(), Some(step));
        assert_eq!(line["val_loss"].as_f64().unwrap().to_bits(), loss.to_bits());
        let dir = std::fs::read_dir(work.join("with/checkpoints"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|d| {
                let m = std::fs::read_to_string(d.join("manifest.json")).unwrap_or_default();
                serde_json::from_str::<serde_json::Value>(&m)
                    .is_ok_and(|m| m["global_step"] == step)
            })
            .unwrap();
        let mut vs = VarStore::new(Device::Cpu);
        let net = MnistNet::new(&vs.root());
        trainbook::models::load_weights(&mut vs, dir.join("model.safetensors"), true).unwrap();
        let mut val = common::random_mnist_loader(2, 12);
        let t = Trainer::new(&dist).progress(false).test(&mut vs, &net, &mut val).unwrap();
        assert_eq!(t.loss.to_bits(), loss.to_bits(), "step {step}: {t}");
        assert_eq!(line["val_acc"].as_f64().unwrap().to_bits(), t.accuracy.to_bits());
    }
    let events: Vec<u8> = std::fs::read_dir(work.join("with/tb"))
        .unwrap()
        .flat_map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    assert!(events.windows(13).any(|w| w == b"val_step/loss"), "TensorBoard has them");
    let zero = Trainer::new(&dist).val_every_steps(Some(0));
    let mut vs = VarStore::new(Device::Cpu);
    let net = MnistNet::new(&vs.root());
    let mut opt = Optimizer::sgd(&vs, 0.02, 0.9);
    let (mut t, mut v) = (common::random_mnist_loader(1, 8), common::random_mnist_loader(2, 8));
    let err = zero.fit(&mut vs, &net, &mut opt, &mut t, &mut v).unwrap_err();
    assert!(err.to_string().contains("val_every_steps"), "{err}");
}
