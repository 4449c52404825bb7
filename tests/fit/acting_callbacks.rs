//! Callbacks that act (`Callback::on_validation_end` with a `RunControl`), on 2 Gloo thread
//! ranks: a rate set by a callback is the next epoch's rate; values a callback logs are in the
//! records and `metrics.jsonl`; a stop asked on one rank only stops both after that epoch, with
//! its checkpoint written; rates that differ between the ranks are an error naming them.
use crate::common;

use std::sync::Arc;

use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};
use trainbook::data::{DataLoader, TensorDataset};
use trainbook::fit::{Callback, FitReport, RunControl, Trainer};
use trainbook::launch::spawn;
use trainbook::models::MnistNet;
use trainbook::train::{read_records, Optimizer};

/// Halves the rate after epoch 0, logs the rate each epoch, and on rank `stopper` asks to stop
/// after epoch 2; with `skew`, rank 1 sets another rate than rank 0.
struct Steer {
    rank: usize,
    stopper: usize,
    skew: bool,
}

impl Callback for Steer {
    fn on_validation_end(&mut self, run: &mut RunControl) -> trainbook::Result<()> {
        run.log("rate_seen", run.optimizer.lr());
        if run.epoch == 0 {
            let lr = run.optimizer.lr() / if self.skew { 2.0 + self.rank as f64 } else { 2.0 };
            run.set_lr(lr);
        }
        if run.epoch == 2 && self.rank == self.stopper {
            run.stop(format!("rank {} had enough", self.rank));
        }
        assert!(run.val.samples > 0 && run.steps_done > 0 && !run.vs.variables().is_empty());
        Ok(())
    }
}

fn data(seed: i64, n: i64) -> Arc<TensorDataset> {
    tch::manual_seed(seed);
    let x = Tensor::randn([n, 1, 28, 28], (Kind::Float, Device::Cpu));
    let y = Tensor::randint(10, [n], (Kind::Int64, Device::Cpu));
    Arc::new(TensorDataset::new(&x, &y, (0..10).map(|c| c.to_string()).collect()).unwrap())
}

fn fit(out: &std::path::Path, skew: bool) -> Vec<Result<FitReport, String>> {
    let (train, val) = (data(1, 16), data(2, 8));
    spawn(2, |dist| {
        let mut vs = VarStore::new(Device::Cpu);
        let net = MnistNet::new(&vs.root());
        let mut opt = Optimizer::sgd(&vs, 0.1, 0.0);
        let mut train = DataLoader::from_arc(train.clone(), 4).distributed(dist).num_workers(0);
        let mut val = DataLoader::from_arc(val.clone(), 4).distributed(dist).num_workers(0);
        let steer = Steer { rank: dist.rank(), stopper: 1, skew };
        Ok(Trainer::new(dist)
            .epochs(6)
            .out(out)
            .progress(false)
            .callback(steer)
            .fit(&mut vs, &net, &mut opt, &mut train, &mut val)
            .map_err(|e| e.to_string()))
    })
    .unwrap()
}

#[test]
fn a_callback_sets_the_rate_logs_and_stops_every_rank() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("acting-callbacks");
    for report in fit(&work.join("run"), false) {
        let r = report.unwrap();
        assert_eq!(r.history.len(), 3, "rank 1's stop after epoch 3 ends both ranks there");
        assert_eq!(r.early_stopped, Some(2));
        let lrs: Vec<f64> = r.history.iter().map(|e| e.lr).collect();
        assert_eq!(lrs, [0.1, 0.05, 0.05], "the halved rate trains from the next epoch");
        let seen: Vec<Option<f64>> = r.history.iter().map(|e| e.metric("rate_seen")).collect();
        assert_eq!(seen, [Some(0.1), Some(0.05), Some(0.05)]);
    }
    let logged = read_records(&work.join("run/metrics.jsonl")).unwrap();
    assert_eq!(logged.len(), 3);
    assert_eq!(logged[1].metric("rate_seen"), Some(0.05));
    // The stopped epoch's checkpoint was written before the run ended.
    let ckpts: Vec<String> = std::fs::read_dir(work.join("run/checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!ckpts.is_empty());
    let manifests = ckpts.iter().filter_map(|c| {
        std::fs::read_to_string(work.join("run/checkpoints").join(c).join("manifest.json")).ok()
    });
    let epochs: Vec<u64> = manifests
        .map(|m| serde_json::from_str::<serde_json::Value>(&m).unwrap()["epoch"].as_u64().unwrap())
        .collect();
    assert!(epochs.contains(&3), "a checkpoint at the start of epoch 4: {epochs:?}");
}

#[test]
fn rates_that_differ_between_ranks_are_an_error() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("acting-callbacks-skew");
    for report in fit(&work.join("run"), true) {
        let err = report.unwrap_err();
        assert!(
            err.contains("callbacks left different learning rates on the ranks after epoch 1"),
            "{err}"
        );
    }
}
