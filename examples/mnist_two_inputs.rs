//! A model of two inputs trained with `fit` through a step of one's own (`TrainStep`): each
//! sample is an MNIST picture of a digit and a number from 0 to 9 (a scalar feature, `[1]`),
//! and the class to predict is whether the pictured digit is greater than the number. The
//! picture goes through the course's MNIST CNN (64 features out), the number joins the
//! features in a head (64 + 1 -> 2), so neither input alone can answer. The data set
//! gives the number as an extra input (`Dataset::extra_inputs`); the step reads it from
//! `StepBatch::extra_inputs`. Everything else is `fit`'s: the loaders, metrics, checkpoints,
//! resumption and launchers. tests/training/two_inputs.rs trains it against the same loop in
//! PyTorch.
//!
//!     cargo run --release --example mnist_two_inputs
//!     torchrun --standalone --nproc-per-node=2 --no-python target/release/examples/mnist_two_inputs
//!
//! Its own flags: --data, --epochs, --batch-size, --lr, --out, --train-limit and --test-limit
//! (the first N pictures of each split), and --initial-weights (start from these weights, e.g.
//! a PyTorch state_dict saved with safetensors). The shared flags are examples/common's. Exit
//! status as examples/mnist.rs.
mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Parser;
use common::{FitArgs, RunArgs};
use tch::nn;
use trainbook::data::Subset;
use trainbook::models::{linear, load_weights};
use trainbook::prelude::*;
use trainbook::train::{StepBatch, StepOutput, Task, TrainStep};
use trainbook::transforms::{AugRng, TensorImage};

#[derive(Parser, Debug)]
#[command(about = "Train a two-input model: is the pictured digit greater than the number?")]
struct Args {
    /// Directory with the MNIST IDX files (built by data-scripts/mnist.py if missing).
    #[arg(long, default_value = "data/mnist")]
    data: PathBuf,
    #[arg(long, default_value_t = 4)]
    epochs: u64,
    /// Batch size per rank.
    #[arg(long, default_value_t = 64)]
    batch_size: usize,
    #[arg(long, default_value_t = 1e-3)]
    lr: f64,
    /// Output directory for metrics, plots, checkpoints and the model.
    #[arg(long, default_value = "runs/mnist_two_inputs")]
    out: PathBuf,
    /// Train on the first N training pictures only.
    #[arg(long, value_name = "N")]
    train_limit: Option<usize>,
    /// Evaluate on the first N test pictures only.
    #[arg(long, value_name = "N")]
    test_limit: Option<usize>,
    /// Start from these weights (a torch.save state dict, or safetensors; PyTorch's parameter
    /// names: body.conv1.weight, ..., head.weight) instead of a fresh initialisation.
    #[arg(long, value_name = "FILE")]
    initial_weights: Option<PathBuf>,
    #[command(flatten)]
    run: RunArgs,
    #[command(flatten)]
    fit: FitArgs,
}

/// MNIST pictures, each with a number to compare it with: sample `i`'s is `(7 i + 3) mod 10`,
/// and its class is 1 when the pictured digit is greater, else 0.
struct DigitVsNumber {
    digits: Subset<Mnist>,
}

impl DigitVsNumber {
    /// The first `limit` pictures of a split.
    fn new(data: &Path, train: bool, limit: Option<usize>) -> trainbook::Result<DigitVsNumber> {
        let digits = Mnist::new(data, train)?
            .with_transform(compose![ToTensor, Normalize::new(&[0.1307], &[0.3081])]);
        let n = limit.unwrap_or(digits.len()).min(digits.len());
        Ok(DigitVsNumber { digits: Subset::new(Arc::new(digits), 0..n)? })
    }

    /// The number sample `index`'s picture is compared with.
    fn number(index: usize) -> i64 {
        ((7 * index + 3) % 10) as i64
    }
}

impl Dataset for DigitVsNumber {
    fn len(&self) -> usize {
        self.digits.len()
    }
    fn get(&self, index: usize, rng: &mut AugRng) -> trainbook::Result<(TensorImage, i64)> {
        let (image, digit) = self.digits.get(index, rng)?;
        Ok((image, (digit > Self::number(index)) as i64))
    }
    fn label(&self, index: usize) -> i64 {
        (self.digits.label(index) > Self::number(index)) as i64
    }
    fn classes(&self) -> Vec<String> {
        vec!["not greater".into(), "greater".into()]
    }
    /// The number, as a `[1]` float tensor.
    fn extra_inputs(&self, index: usize, _rng: &mut AugRng) -> trainbook::Result<Vec<Tensor>> {
        Ok(vec![Tensor::from_slice(&[Self::number(index) as f32])])
    }
}

/// The CNN on the picture (64 features) and a head on the features and the number.
struct CompareModel {
    body: MnistNet,
    head: nn::Linear,
}

impl CompareModel {
    fn new(root: &nn::Path) -> CompareModel {
        let body = MnistNet::with_outputs(&(root / "body"), 64);
        CompareModel { body, head: linear(&(root / "head"), 64 + 1, 2) }
    }

    /// The logits `[B, 2]`: the head on the picture's features (after a ReLU) beside the
    /// number.
    fn logits(&self, batch: &StepBatch<'_>, train: bool) -> Tensor {
        let features = self.body.forward_t(batch.images, train).relu();
        Tensor::cat(&[&features, &batch.extra_inputs[0]], 1).apply(&self.head)
    }
}

impl TrainStep for CompareModel {
    fn task(&self) -> Option<Task> {
        Some(Task::Classification)
    }
    fn train_step(&self, batch: &StepBatch<'_>) -> trainbook::Result<StepOutput> {
        let output = self.logits(batch, true);
        Ok(StepOutput { loss: CrossEntropyLoss::default().mean(&output, batch.target), output })
    }
    fn eval_step(&self, batch: &StepBatch<'_>) -> trainbook::Result<StepOutput> {
        let output = self.logits(batch, false);
        let loss = CrossEntropyLoss::default().per_sample(&output, batch.target);
        Ok(StepOutput { loss, output })
    }
}

fn main() -> std::process::ExitCode {
    common::exit_status("mnist_two_inputs", run())
}

fn run() -> anyhow::Result<()> {
    let args = Args::parse();
    // 1. Join the process group the launcher describes (a world of one without a launcher).
    let dist = args.run.dist()?;
    if dist.is_main() {
        ensure_mnist(&args.data)?;
    }
    dist.barrier()?;
    let train = DigitVsNumber::new(&args.data, true, args.train_limit)?;
    let test = DigitVsNumber::new(&args.data, false, args.test_limit)?;
    dist.println(format!(
        "MNIST digit vs number: {} training / {} test pictures, each with a number, {}, \
         device {:?}",
        train.len(),
        test.len(),
        dist.describe(),
        dist.device()
    ));
    let mut train_loader = DataLoader::new(train, args.batch_size)
        .shuffle(true)
        .seed(args.run.seed)
        .distributed(&dist)
        .num_workers(args.run.workers);
    let mut test_loader =
        DataLoader::new(test, 1000).distributed(&dist).num_workers(args.run.workers);

    // 2. The two-input model.
    tch::manual_seed(args.run.seed as i64);
    let mut vs = VarStore::new(dist.device());
    anyhow::ensure!(!args.run.sync_bn, "--sync-bn: the MNIST CNN has no BatchNorm layer");
    let model = CompareModel::new(&vs.root());
    if let Some(path) = &args.initial_weights {
        load_weights(&mut vs, path, true)?;
        dist.println(format!("initial weights from {}", path.display()));
    }
    tch::manual_seed(args.run.seed as i64 + dist.rank() as i64); // distinct dropout masks per rank
    let mut opt = Optimizer::adam(&vs, args.lr);

    // 3. Train through the model's own step.
    let trainer = args.fit.apply(args.run.trainer(&dist));
    let report = trainer
        .epochs(args.epochs)
        .out(&args.out)
        .record_config(serde_json::json!({
            "example": "mnist_two_inputs", "epochs": args.epochs,
            "batch_size": args.batch_size, "lr": args.lr, "seed": args.run.seed,
        }))
        .fit(&mut vs, &model as &dyn TrainStep, &mut opt, &mut train_loader, &mut test_loader)?;
    if let (Some(last), None) = (report.last(), &report.interrupted) {
        dist.println(format!(
            "test accuracy {:.1}% (is the digit greater than the number?)",
            100.0 * last.val_acc.unwrap_or(f64::NAN)
        ));
        dist.println(format!(
            "wrote {}/{{metrics.jsonl, curves.png, model.safetensors, checkpoints/}}",
            args.out.display()
        ));
    }
    dist.destroy()?;
    common::exit_if_preempted(&report);
    Ok(())
}
