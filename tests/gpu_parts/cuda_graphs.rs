//! The training step as a CUDA graph on the GPU (`StepGraph`, `Trainer::cuda_graphs`): in the
//! deterministic mode the graphed runs end with the eager runs' weights bit for bit, in float32
//! and in bf16 autocast + channels_last, through `train_epoch` (the course ResNet34, Adam,
//! gradient clipping, a partial last batch that runs eagerly) and through `fit` with a resume
//! from a mid-epoch checkpoint (the graph captured again after it).
use std::cell::RefCell;
use std::path::Path;

use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};
use trainbook::data::{DataLoader, TensorDataset};
use trainbook::models::{resnet34_classifier, to_channels_last};
use trainbook::train::{
    train_epoch, CrossEntropyLoss, EpochOptions, GradClip, Optimizer, Precision, StepGraph,
};

use crate::common;
use crate::common::gpu::gpu;

#[test]
fn graphed_steps_train_as_the_eager_steps_do() {
    let Some(_) = gpu("graphed_steps_train_as_the_eager_steps_do") else { return };
    crate::run_probe("cuda_graphs::cuda_graph_probe");
}

/// Two epochs of 104 pictures of 32 px in batches of 16 (6 full batches and one of 8):
/// returns the weights file and the graph's (replays, eager steps).
fn two_epochs(device: Device, dir: &Path, precision: Precision, graphed: bool) -> (u64, u64) {
    tch::manual_seed(5);
    let x = Tensor::randn([104, 3, 32, 32], (Kind::Float, Device::Cpu));
    let y = Tensor::randint(3, [104], (Kind::Int64, Device::Cpu));
    let classes = vec!["C0".to_string(), "C2".into(), "C4".into()];
    let ds = TensorDataset::new(&x, &y, classes).unwrap();
    let mut loader = DataLoader::new(ds, 16).shuffle(true).num_workers(2).device(device);
    tch::manual_seed(7);
    let vs = VarStore::new(device);
    let net = resnet34_classifier(&vs.root(), 3);
    let cl = precision == Precision::Bf16;
    if cl {
        to_channels_last(&vs);
    }
    let mut opt = Optimizer::adam(&vs, 1e-3);
    let graph = RefCell::new(StepGraph::new());
    let mut opts = EpochOptions::on(device)
        .quiet()
        .precision(precision)
        .channels_last(cl)
        .clip_grad(GradClip::norm(1.0));
    if graphed {
        opts = opts.cuda_graph(&graph);
    }
    let mut losses = Vec::new();
    for epoch in 0..2 {
        loader.set_epoch(epoch);
        let s = train_epoch(&net, &mut loader, &mut opt, &CrossEntropyLoss::new(), &opts).unwrap();
        losses.push(s.loss);
    }
    let name = format!("{}-{precision:?}.safetensors", if graphed { "graphed" } else { "eager" });
    // channels_last weights are not contiguous: saved as contiguous copies (same values).
    let weights: Vec<(String, Tensor)> =
        vs.variables().into_iter().map(|(n, t)| (n, t.contiguous())).collect();
    Tensor::write_safetensors(&weights, dir.join(name)).unwrap();
    let g = graph.borrow();
    println!(
        "{precision:?}, graphed {graphed}: epoch losses {losses:?}, replays {}, eager steps {}{}",
        g.replays(),
        g.eager_steps(),
        g.eager_reason().map(|r| format!(" (eager: {r})")).unwrap_or_default()
    );
    (g.replays(), g.eager_steps())
}

#[test]
#[ignore = "run by graphed_steps_train_as_the_eager_steps_do"]
fn cuda_graph_probe() {
    // Before any CUDA work: cuBLAS reads its workspace setting when it starts.
    trainbook::train::use_deterministic_algorithms(true).unwrap();
    let Some(device) = gpu("cuda_graph_probe") else { return };
    let dir = common::WorkDir::new("gpu-graphs");
    for precision in [Precision::F32, Precision::Bf16] {
        two_epochs(device, &dir, precision, false);
        let (replays, eager) = two_epochs(device, &dir, precision, true);
        // 3 warm-up steps, the capture on the 4th (replayed at once), the partial batches eager.
        assert_eq!((replays, eager), (3 + 6, 3 + 2), "{precision:?}: replays and eager steps");
        common::assert_same_weights(
            &dir.join(format!("eager-{precision:?}.safetensors")),
            &dir.join(format!("graphed-{precision:?}.safetensors")),
            &format!("{precision:?}: graphed against eager"),
        );
    }
    fit_probe(device, &dir);
}

/// `fit` with `cuda_graphs(true)`: the same weights as without, and a run resumed from its
/// step-4 checkpoint (a fresh graph, warmed up and captured again) ends where it does.
fn fit_probe(device: Device, dir: &Path) {
    let dist = trainbook::dist::Dist::single(device);
    // 52 samples: 6 batches of 8 and one of 4, which runs eagerly.
    let run = |out: &Path, resume: bool, graphs: bool| {
        crate::resume::mnist_fit(&dist, out, (52, resume, graphs));
    };
    let (eager, whole, resumed) =
        (dir.join("fit-eager"), dir.join("fit-whole"), dir.join("fit-resumed"));
    run(&eager, false, false);
    run(&whole, false, true);
    common::assert_same_weights(
        &eager.join("model.safetensors"),
        &whole.join("model.safetensors"),
        "fit with CUDA graphs against fit without",
    );
    crate::resume::copy_step_checkpoint(&whole, &resumed, "step-000000004");
    run(&resumed, true, true);
    common::assert_same_weights(
        &whole.join("model.safetensors"),
        &resumed.join("model.safetensors"),
        "a graphed run resumed from step 4 against the uninterrupted one",
    );
    // On the GPU every epoch records its peak memory (one rank), reserved at least allocated.
    let log = std::fs::read_to_string(whole.join("metrics.jsonl")).unwrap();
    for line in log.lines() {
        let r: trainbook::train::EpochRecord = serde_json::from_str(line).unwrap();
        let (a, res) = (&r.max_memory_allocated, &r.max_memory_reserved);
        assert!(a.len() == 1 && a[0] > 0 && res.len() == 1 && res[0] >= a[0], "{line}");
    }
    println!("fit with CUDA graphs: the eager run's weights, and the same after a resume");
}
