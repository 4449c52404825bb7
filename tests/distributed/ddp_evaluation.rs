//! `evaluate` under DDP is exact: over 15 samples split between 2 ranks (with the sampler's
//! padding, which is not counted), every rank holds the global accuracy and confusion matrix of
//! one process; the loss is a sum of float32 per-sample losses over other batch groupings, so it
//! is compared within float32 rounding.
//!
//! The ranks are this test binary (`common::ranks`).
use crate::common;

use std::path::{Path, PathBuf};

use crate::common::ranks::run_ranks;
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};
use trainbook::data::{DataLoader, DistributedSampler, TensorDataset};
use trainbook::dist::Dist;
use trainbook::models::MnistNet;
use trainbook::train::{evaluate, CrossEntropyLoss, Ddp, EpochOptions};

#[test]
#[ignore = "a rank of the multi-process tests, started by them"]
fn rank_worker() {
    let _turn = common::module_turn(module_path!());
    let scenario = std::env::var("TB_SCENARIO").expect("TB_SCENARIO");
    let out = PathBuf::from(std::env::var("TB_OUT").unwrap_or_default());
    match scenario.as_str() {
        "metrics" => metrics_rank(&out),
        _ => panic!("unknown scenario {scenario}"),
    }
}

/// Exact evaluation over 15 samples split (with padding) between the ranks.
fn metrics_rank(out: &Path) {
    let dist = Dist::init().unwrap();
    tch::manual_seed(3);
    let vs = VarStore::new(Device::Cpu);
    let net = MnistNet::new(&vs.root());
    let ddp = Ddp::wrap(&vs, &dist).unwrap();
    tch::manual_seed(9);
    let x = Tensor::randn([15, 1, 28, 28], (Kind::Float, Device::Cpu));
    let y = Tensor::randint(10, [15], (Kind::Int64, Device::Cpu));
    let ds = TensorDataset::new(&x, &y, (0..10).map(|i| i.to_string()).collect()).unwrap();
    let sampler =
        DistributedSampler::new(15, dist.world_size(), dist.rank()).unwrap().shuffle(true);
    let mut loader = DataLoader::new(ds, 4).sampler(sampler).num_workers(0);
    let s = evaluate(
        &net,
        &mut loader,
        &CrossEntropyLoss::new(),
        &EpochOptions::default().quiet().hooks(&ddp),
    )
    .unwrap();
    let json = serde_json::json!({"loss": s.loss, "accuracy": s.accuracy, "samples": s.samples, "confusion": s.confusion.unwrap().counts});
    std::fs::write(out.join(format!("metrics{}.json", dist.rank())), json.to_string()).unwrap();
    dist.destroy().unwrap();
}

#[test]
fn evaluation_is_exact_across_ranks() {
    let _turn = common::module_turn(module_path!());
    let (one, two) = (common::WorkDir::new("ddp-metrics-1"), common::WorkDir::new("ddp-metrics-2"));
    run_ranks(module_path!(), "metrics", 1, &one);
    run_ranks(module_path!(), "metrics", 2, &two);
    let read = |p: PathBuf| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    };
    let (a, b, b1) = (
        read(one.join("metrics0.json")),
        read(two.join("metrics0.json")),
        read(two.join("metrics1.json")),
    );
    assert_eq!(b["samples"], 15, "padding must not be counted: {b}");
    assert_eq!(a["accuracy"], b["accuracy"]);
    assert_eq!(a["confusion"], b["confusion"]);
    assert_eq!(b, b1, "every rank holds the global result");
    let (la, lb) = (a["loss"].as_f64().unwrap(), b["loss"].as_f64().unwrap());
    // Per-sample losses come from float32 kernels run on different batch groupings.
    assert!((la - lb).abs() <= 1e-6 * la.abs(), "loss {la} vs {lb}");
}
