//! A regression head trained end to end with `fit`: the course's MNIST CNN with one output
//! learns each digit's value as a number (7 for a seven) under a mean squared error, and is
//! judged by its mean absolute and root mean squared errors in digits. The digits' labels
//! become float targets through `TargetTransform` (torchvision's `target_transform=`); the
//! rest is the classification program's (examples/mnist.rs): the same loader, checkpoints,
//! resumption and launchers. tests/training/regression.rs trains it against the same loop in
//! PyTorch.
//!
//!     cargo run --release --example mnist_regression
//!     torchrun --standalone --nproc-per-node=2 --no-python target/release/examples/mnist_regression
//!
//! Its own flags: --data, --epochs, --batch-size, --lr, --out, --loss (mse, l1, huber,
//! smooth_l1), --train-limit and --test-limit (the first N pictures of each split), and
//! --initial-weights (start from these weights, e.g. a PyTorch state_dict saved with
//! safetensors, instead of a fresh initialisation). The shared flags are examples/common's
//! (`--monitor-metric val_mae` keeps best/ by the mean absolute error). Exit status as
//! examples/mnist.rs.
mod common;

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Parser, ValueEnum};
use common::{FitArgs, RunArgs};
use trainbook::data::{Subset, TargetTransform};
use trainbook::models::load_weights;
use trainbook::prelude::*;
use trainbook::train::{HuberLoss, L1Loss, MSELoss, SmoothL1Loss};

/// The regression losses, as torch names them.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum LossName {
    /// torch.nn.MSELoss
    Mse,
    /// torch.nn.L1Loss
    L1,
    /// torch.nn.HuberLoss(delta=1.0)
    Huber,
    /// torch.nn.SmoothL1Loss(beta=1.0)
    SmoothL1,
}

#[derive(Parser, Debug)]
#[command(about = "Train the MNIST CNN to predict each digit's value as a number")]
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
    #[arg(long, default_value = "runs/mnist_regression")]
    out: PathBuf,
    /// The loss between the predicted and the true value.
    #[arg(long, value_enum, default_value = "mse")]
    loss: LossName,
    /// Train on the first N training pictures only.
    #[arg(long, value_name = "N")]
    train_limit: Option<usize>,
    /// Evaluate on the first N test pictures only.
    #[arg(long, value_name = "N")]
    test_limit: Option<usize>,
    /// Start from these weights (a torch.save state dict or checkpoint, or safetensors;
    /// PyTorch's parameter names) instead of a fresh initialisation.
    #[arg(long, value_name = "FILE")]
    initial_weights: Option<PathBuf>,
    #[command(flatten)]
    run: RunArgs,
    #[command(flatten)]
    fit: FitArgs,
}

/// The digits of one split, the first `limit` of them, with each label's value as the
/// target: `[1]` float per picture.
fn digit_values(
    data: &std::path::Path,
    train: bool,
    limit: Option<usize>,
) -> trainbook::Result<TargetTransform<Subset<Mnist>>> {
    let digits = Mnist::new(data, train)?
        .with_transform(compose![ToTensor, Normalize::new(&[0.1307], &[0.3081])]);
    let n = limit.unwrap_or(digits.len()).min(digits.len());
    let first = Subset::new(Arc::new(digits), 0..n)?;
    Ok(TargetTransform::new(first, |label| vec![label as f32]))
}

fn main() -> std::process::ExitCode {
    common::exit_status("mnist_regression", run())
}

fn run() -> anyhow::Result<()> {
    let args = Args::parse();
    // 1. Join the process group the launcher describes (a world of one without a launcher).
    let dist = args.run.dist()?;
    if dist.is_main() {
        ensure_mnist(&args.data)?;
    }
    dist.barrier()?;
    let train = digit_values(&args.data, true, args.train_limit)?;
    let test = digit_values(&args.data, false, args.test_limit)?;
    dist.println(format!(
        "MNIST digit values: {} training / {} test images, {}, device {:?}",
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

    // 2. The classification CNN with a one-number head.
    tch::manual_seed(args.run.seed as i64);
    let mut vs = VarStore::new(dist.device());
    anyhow::ensure!(!args.run.sync_bn, "--sync-bn: the MNIST CNN has no BatchNorm layer");
    let net = MnistNet::with_outputs(&vs.root(), 1);
    if let Some(path) = &args.initial_weights {
        load_weights(&mut vs, path, true)?;
        dist.println(format!("initial weights from {}", path.display()));
    }
    tch::manual_seed(args.run.seed as i64 + dist.rank() as i64); // distinct dropout masks per rank
    let mut opt = Optimizer::adam(&vs, args.lr);

    // 3. Train against the loss of choice; the run measures MAE and RMSE (the task follows
    //    from the loss).
    let trainer = args.run.metrics(args.fit.apply(args.run.trainer(&dist)), 0)?;
    let trainer = match args.loss {
        LossName::Mse => trainer.loss(MSELoss),
        LossName::L1 => trainer.loss(L1Loss),
        LossName::Huber => trainer.loss(HuberLoss::default()),
        LossName::SmoothL1 => trainer.loss(SmoothL1Loss::default()),
    };
    let run = (&dist, &trainer, (args.out.as_path(), args.initial_weights.is_some()));
    let model = (&mut vs, &net as &dyn tch::nn::ModuleT, &mut opt);
    if args.run.instead_of_training(run, model, (&mut train_loader, &mut test_loader))? {
        return Ok(dist.destroy()?);
    }
    let report = trainer
        .epochs(args.epochs)
        .out(&args.out)
        .record_config(serde_json::json!({
            "example": "mnist_regression", "epochs": args.epochs,
            "batch_size": args.batch_size, "lr": args.lr, "seed": args.run.seed,
            "loss": format!("{:?}", args.loss),
        }))
        .fit(&mut vs, &net, &mut opt, &mut train_loader, &mut test_loader)?;
    if let Some(last) = report.last() {
        dist.println(format!(
            "test: mean absolute error {:.3} digits, root mean squared error {:.3}",
            last.val_mae.unwrap_or(f64::NAN),
            last.val_rmse.unwrap_or(f64::NAN)
        ));
    }
    if report.interrupted.is_none() {
        dist.println(format!(
            "wrote {}/{{metrics.jsonl, curves.png, model.safetensors, checkpoints/}}",
            args.out.display()
        ));
    }
    dist.destroy()?;
    common::exit_if_preempted(&report);
    Ok(())
}
