//! `Trainer::freeze_backbone_epochs`: the first N epochs train only the head, then the whole
//! network, under DDP too. Two thread ranks over Gloo: the backbone does not move while frozen
//! and moves after, and the ranks stay replicas of each other bit for bit, which holds only if
//! the unfrozen backbone's gradients are averaged (the model is wrapped again when what trains
//! changes: a reducer built while the backbone was frozen would leave them local to each rank).
//! A model without an `fc.*` head is refused with an error naming the setting, and a run resumed
//! inside its frozen epochs ends on the uninterrupted run's weights, bit for bit.
use crate::common;

use std::sync::{Arc, Mutex};

use tch::nn::{linear, seq_t, SequentialT};
use trainbook::data::TensorDataset;
use trainbook::fit::Callback;
use trainbook::prelude::*;

/// spawn's thread ranks take turns on the process's CPU generator: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// The backbone's and the head's weights at the end of every training epoch.
struct Watch {
    body: Tensor,
    head: Tensor,
    seen: Vec<(Vec<f32>, Vec<f32>)>,
}

fn values(t: &Tensor) -> Vec<f32> {
    Vec::try_from(t.detach().flatten(0, -1)).unwrap()
}

impl Callback for Watch {
    fn on_train_epoch_end(&mut self, _: u64, _: &EpochSummary, _: u64) -> Result<()> {
        self.seen.push((values(&self.body), values(&self.head)));
        Ok(())
    }
}

type Seen = (Vec<f32>, Vec<(Vec<f32>, Vec<f32>)>);

fn net(vs: &VarStore, head: &str) -> SequentialT {
    seq_t()
        .add_fn(|x| x.flatten(1, -1))
        .add(linear(vs.root() / "body", 16, 8, Default::default()))
        .add_fn(|x| x.relu())
        .add(linear(vs.root() / head, 8, 3, Default::default()))
}

/// One rank: 2 epochs, the first with the backbone frozen; returns the backbone's initial
/// weights and what the callback saw.
fn rank(dist: &Dist, out: &std::path::Path, head: &str) -> Result<Seen> {
    let x = Tensor::randn([16, 1, 4, 4], (Kind::Float, Device::Cpu));
    let y = Tensor::randint(3, [16], (Kind::Int64, Device::Cpu));
    let classes: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
    let vs = VarStore::new(Device::Cpu);
    let model = net(&vs, head);
    let vars = vs.variables();
    let watch = Arc::new(Mutex::new(Watch {
        body: vars["body.weight"].shallow_clone(),
        head: vars[&format!("{head}.weight")].shallow_clone(),
        seen: Vec::new(),
    }));
    let init = values(&vars["body.weight"]);
    let mut opt = Optimizer::sgd(&vs, 0.1, 0.9);
    let data = || TensorDataset::new(&x, &y, classes.clone());
    let mut train = DataLoader::new(data()?, 4).num_workers(0).distributed(dist);
    let mut val = DataLoader::new(data()?, 4).num_workers(0).distributed(dist);
    let mut vs = vs;
    Trainer::new(dist)
        .epochs(2)
        .out(out)
        .resume(false)
        .progress(false)
        .step_log(false)
        .checkpoint_every_epochs(0)
        .keep_best(None)
        .freeze_backbone_epochs(1)
        .callback(watch.clone())
        .fit(&mut vs, &model, &mut opt, &mut train, &mut val)?;
    let seen = std::mem::take(&mut watch.lock().unwrap().seen);
    Ok((init, seen))
}

#[test]
fn the_head_trains_alone_then_the_whole_network_and_the_ranks_stay_replicas() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    tch::manual_seed(4);
    let ranks = spawn(2, |dist| rank(dist, dir.path(), "fc")).unwrap();
    let (init, seen) = &ranks[0];
    assert_eq!(seen.len(), 2);
    assert_eq!(&seen[0].0, init, "epoch 1: the frozen backbone did not move");
    assert_ne!(&seen[1].0, &seen[0].0, "epoch 2: the unfrozen backbone trained");
    assert_ne!(seen[1].1, seen[0].1, "the head trained");
    assert_eq!(ranks[0], ranks[1], "DDP keeps the ranks' weights equal, bit for bit");
}

#[test]
fn a_model_without_an_fc_head_is_refused() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let dist = Dist::single(Device::Cpu);
    let err = rank(&dist, dir.path(), "classifier").unwrap_err().to_string();
    assert!(err.contains("freeze_backbone_epochs") && err.contains("fc."), "{err}");
}

/// One rank, 3 epochs of which the first 2 have the backbone frozen, stopped after `stop_after`
/// steps (None: not stopped) and resumed when `resume`; returns the backbone's initial weights
/// and the final weights, by name.
fn frozen_run(out: &std::path::Path, stop_after: Option<u64>, resume: bool) -> (Tensor, Weights) {
    let dist = Dist::single(Device::Cpu);
    tch::manual_seed(11);
    let x = Tensor::randn([16, 1, 4, 4], (Kind::Float, Device::Cpu));
    let y = Tensor::randint(3, [16], (Kind::Int64, Device::Cpu));
    let classes: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
    let mut vs = VarStore::new(Device::Cpu);
    let model = net(&vs, "fc");
    let init = vs.variables()["body.weight"].copy();
    let mut opt = Optimizer::sgd(&vs, 0.1, 0.9);
    let data = || TensorDataset::new(&x, &y, classes.clone());
    let mut train = DataLoader::new(data().unwrap(), 4).shuffle(true).num_workers(0);
    let mut val = DataLoader::new(data().unwrap(), 4).num_workers(0);
    Trainer::new(&dist)
        .epochs(3)
        .out(out)
        .resume(resume)
        .progress(false)
        .keep_best(None)
        .freeze_backbone_epochs(2)
        .max_steps(stop_after)
        .fit(&mut vs, &model, &mut opt, &mut train, &mut val)
        .unwrap();
    let mut weights: Weights = vs.variables().into_iter().collect();
    weights.sort_by(|a, b| a.0.cmp(&b.0));
    (init, weights)
}

type Weights = Vec<(String, Tensor)>;

/// A run stopped at the end of its first frozen epoch and resumed freezes the backbone again for
/// the second (the setting is read against the epoch the checkpoint restores), unfreezes it for
/// the third, and ends on the uninterrupted run's weights, bit for bit.
#[test]
fn a_run_resumed_inside_its_frozen_epochs_ends_as_the_uninterrupted_one() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (init, whole) = frozen_run(&dir.path().join("whole"), None, false);
    // 16 samples in batches of 4: 4 steps an epoch, so the first stop is at epoch 1's end.
    let (_, first) = frozen_run(&dir.path().join("cut"), Some(4), false);
    let body = |w: &Weights| w.iter().find(|(n, _)| n == "body.weight").unwrap().1.copy();
    assert!(body(&first).equal(&init), "epoch 1 (frozen) moved the backbone");
    let (_, resumed) = frozen_run(&dir.path().join("cut"), None, true);
    assert_eq!(whole.len(), resumed.len());
    for ((name, a), (_, b)) in whole.iter().zip(&resumed) {
        assert!(a.equal(b), "{name}: the resumed run left the uninterrupted one's trajectory");
    }
    assert!(!body(&whole).equal(&init), "epoch 3 (unfrozen) trained the backbone");
}
