//! The training step as a CUDA graph on the GPU (`StepGraph`, `Trainer::cuda_graphs`): in the
//! deterministic mode the graphed runs end with the eager runs' weights bit for bit, in float32
//! and in bf16 autocast + channels_last, through `train_epoch` (the course ResNet34, Adam,
//! gradient clipping, a partial last batch that runs eagerly), through `fit` with a resume
//! from a mid-epoch checkpoint (the graph captured again after it), and for a step of one's own
//! on a picture and a vector (`train_epoch_step`, the vector a static buffer of its own).
use std::cell::RefCell;
use std::path::Path;

use rand::Rng;
use tch::nn::{self, Module, VarStore};
use tch::{Device, Kind, Tensor};
use trainbook::data::{DataLoader, Dataset, TensorDataset};
use trainbook::models::{resnet34_classifier, to_channels_last};
use trainbook::train::{
    train_epoch, train_epoch_step, CrossEntropyLoss, EpochOptions, GradClip, Optimizer, Precision,
    StepBatch, StepGraph, StepOutput, TrainStep,
};
use trainbook::transforms::{AugRng, TensorImage};

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
    let (replays, eager) = two_input_epochs(device, &dir, false);
    assert_eq!((replays, eager), (0, 0), "no graph given");
    let (replays, eager) = two_input_epochs(device, &dir, true);
    assert_eq!((replays, eager), (3 + 6, 3 + 2), "two inputs: replays and eager steps");
    common::assert_same_weights(
        &dir.join("two-inputs-eager.safetensors"),
        &dir.join("two-inputs-graphed.safetensors"),
        "a step of one's own with an extra input: graphed against eager",
    );
}

/// 52 samples: a 3x8x8 picture and a `[4]` vector of random values from the sample's stream,
/// label `index % 3`.
struct PictureAndVector;

impl Dataset for PictureAndVector {
    fn len(&self) -> usize {
        52
    }
    fn get(&self, index: usize, rng: &mut AugRng) -> trainbook::Result<(TensorImage, i64)> {
        let data: Vec<f32> = (0..3 * 8 * 8).map(|_| rng.random::<f32>()).collect();
        Ok((TensorImage { channels: 3, height: 8, width: 8, data }, self.label(index)))
    }
    fn label(&self, index: usize) -> i64 {
        index as i64 % 3
    }
    fn classes(&self) -> Vec<String> {
        ["C0", "C2", "C4"].map(String::from).to_vec()
    }
    fn extra_inputs(&self, _index: usize, rng: &mut AugRng) -> trainbook::Result<Vec<Tensor>> {
        Ok(vec![Tensor::from_slice(&(0..4).map(|_| rng.random::<f32>()).collect::<Vec<_>>())])
    }
}

/// A convolution over the picture, pooled, beside the vector, into a linear head.
struct PictureBesideVector {
    conv: nn::Conv2D,
    head: nn::Linear,
}

impl PictureBesideVector {
    fn logits(&self, b: &StepBatch<'_>) -> Tensor {
        let pooled = self.conv.forward(b.images).relu().mean_dim([2, 3].as_slice(), false, None);
        self.head.forward(&Tensor::cat(&[&pooled, &b.extra_inputs[0]], 1))
    }
}

impl TrainStep for PictureBesideVector {
    fn train_step(&self, b: &StepBatch<'_>) -> trainbook::Result<StepOutput> {
        let output = self.logits(b);
        Ok(StepOutput { loss: CrossEntropyLoss::default().mean(&output, b.target), output })
    }
    fn eval_step(&self, b: &StepBatch<'_>) -> trainbook::Result<StepOutput> {
        let output = self.logits(b);
        Ok(StepOutput { loss: CrossEntropyLoss::default().per_sample(&output, b.target), output })
    }
}

/// Two epochs of [`PictureBesideVector`] on [`PictureAndVector`] in batches of 8 (6 full and
/// one of 4), graphed or not: writes the weights, returns the graph's (replays, eager steps).
fn two_input_epochs(device: Device, dir: &Path, graphed: bool) -> (u64, u64) {
    let mut loader = DataLoader::new(PictureAndVector, 8).shuffle(true).num_workers(2);
    tch::manual_seed(7);
    let vs = VarStore::new(device);
    let step = PictureBesideVector {
        conv: nn::conv2d(vs.root(), 3, 16, 3, Default::default()),
        head: nn::linear(vs.root(), 16 + 4, 3, Default::default()),
    };
    let mut opt = Optimizer::adam(&vs, 1e-2);
    let graph = RefCell::new(StepGraph::new());
    let mut opts = EpochOptions::on(device).quiet();
    if graphed {
        opts = opts.cuda_graph(&graph);
    }
    for epoch in 0..2 {
        loader.set_epoch(epoch);
        train_epoch_step(&step, &mut loader, &mut opt, &opts, &mut ()).unwrap();
    }
    let name = format!("two-inputs-{}.safetensors", if graphed { "graphed" } else { "eager" });
    let weights: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    Tensor::write_safetensors(&weights, dir.join(name)).unwrap();
    let g = graph.borrow();
    (g.replays(), g.eager_steps())
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
