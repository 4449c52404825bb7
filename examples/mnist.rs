//! The course's MNIST program: a small CNN trained with Adam and evaluated on the test set every
//! epoch, with checkpoints. Expected: about 97.5-98% test accuracy after the default 8 epochs
//! on the offline 8,000/2,000 MNIST (under a minute on 2 CPU cores), ~99% on the canonical set.
//! Rank 0 writes metrics.jsonl, curves.png, confusion.png and model.safetensors under --out.
//! The same binary runs alone or as one rank of a data-parallel job, and resumes from
//! OUT/checkpoints after a crash:
//!
//!     cargo run --release --example mnist
//!     torchrun --standalone --nproc-per-node=2 --max-restarts=1 --no-python target/release/examples/mnist
//!
//! Its own flags: --data, --epochs, --batch-size, --lr, --out. The shared ones live in
//! examples/common/mod.rs: `RunArgs` (--device, --seed, --workers, --no-resume, --precision,
//! --channels-last, --clip-grad-norm, --monitor-metric, --early-stop, --requeue, --no-step-log, --ema, --sync-bn, --weight-trail) and `FitArgs` (--save-every, --save-every-steps, --keep-last, --accumulate,
//! --find-unused-parameters).
//!
//! Exit status: 0 when the run finished, or stopped on Ctrl-C or OUT/STOP; 99 when SIGTERM or
//! SIGUSR1 stopped it (a Slurm time limit or `--signal=USR1@N`, `scancel`, torchrun's SIGTERM):
//! the checkpoint is written and the same command continues the run; with --requeue (a
//! `RunArgs` flag) rank 0 first requeues the Slurm job on SIGUSR1 (examples/slurm/); 1 on an
//! error.
mod common;

use std::path::PathBuf;

use clap::Parser;
use common::{FitArgs, RunArgs};
use trainbook::prelude::*;

#[derive(Parser, Debug)]
#[command(about = "Train the course's MNIST CNN")]
struct Args {
    /// Directory with the MNIST IDX files (built by data-scripts/mnist.py if missing).
    #[arg(long, default_value = "data/mnist")]
    data: PathBuf,
    #[arg(long, default_value_t = 8)]
    epochs: u64,
    /// Batch size per rank.
    #[arg(long, default_value_t = 64)]
    batch_size: usize,
    #[arg(long, default_value_t = 1e-3)]
    lr: f64,
    /// Output directory for metrics, plots, checkpoints and the model.
    #[arg(long, default_value = "runs/mnist")]
    out: PathBuf,
    #[command(flatten)]
    run: RunArgs,
    #[command(flatten)]
    fit: FitArgs,
}

fn main() -> std::process::ExitCode {
    common::exit_status("mnist", run())
}

fn run() -> anyhow::Result<()> {
    let args = Args::parse();
    // 1. Join the process group the launcher describes (a world of one without a launcher).
    let dist = args.run.dist()?;
    if dist.is_main() {
        ensure_mnist(&args.data)?;
    }
    dist.barrier()?;
    let transform = || compose![ToTensor, Normalize::new(&[0.1307], &[0.3081])];
    let train = Mnist::new(&args.data, true)?.with_transform(transform());
    let test = Mnist::new(&args.data, false)?.with_transform(transform());
    dist.println(format!(
        "MNIST: {} training / {} test images, {}, device {:?}",
        train.len(),
        test.len(),
        dist.describe(),
        dist.device()
    ));
    // 2. Each rank sees its own share of every epoch.
    let mut train_loader = DataLoader::new(train, args.batch_size)
        .shuffle(true)
        .seed(args.run.seed)
        .distributed(&dist)
        .num_workers(args.run.workers);
    let mut test_loader =
        DataLoader::new(test, 1000).distributed(&dist).num_workers(args.run.workers);

    // 3. The model (fit wraps it for data parallelism: rank 0's weights go to every rank).
    tch::manual_seed(args.run.seed as i64);
    let mut vs = VarStore::new(dist.device());
    anyhow::ensure!(!args.run.sync_bn, "--sync-bn: the MNIST CNN has no BatchNorm layer");
    let net = MnistNet::new(&vs.root());
    tch::manual_seed(args.run.seed as i64 + dist.rank() as i64); // distinct dropout masks per rank
    let mut opt = Optimizer::adam(&vs, args.lr);

    // 4. Train with checkpoints (resuming if a previous run left one); rank 0 writes files.
    //    The shared flags (examples/common) set resume, seed, precision, channels_last, the
    //    checkpoint cadence, gradient accumulation and DDP's options.
    let trainer = args.run.metrics(args.fit.apply(args.run.trainer(&dist)), 10)?;
    let run = (&dist, &trainer, (args.out.as_path(), false));
    let model = (&mut vs, &net as &dyn tch::nn::ModuleT, &mut opt);
    if args.run.instead_of_training(run, model, (&mut train_loader, &mut test_loader))? {
        return Ok(dist.destroy()?);
    }
    let report = trainer
        .epochs(args.epochs)
        .out(&args.out)
        .record_config(serde_json::json!({
            "example": "mnist", "epochs": args.epochs, "batch_size": args.batch_size,
            "lr": args.lr, "seed": args.run.seed
        }))
        .fit(&mut vs, &net, &mut opt, &mut train_loader, &mut test_loader)?;
    // A stopped run wrote only its checkpoint (and said where); a finished one, the rest too.
    if report.interrupted.is_none() {
        dist.println(format!(
            "wrote {}/{{metrics.jsonl, curves.png, confusion.png, model.safetensors, checkpoints/}}",
            args.out.display()
        ));
    }
    // 5. Leave the group cleanly.
    dist.destroy()?;
    // 6. Exit status 99 after a stop by SIGTERM/SIGUSR1 (see examples/common).
    common::exit_if_preempted(&report);
    Ok(())
}
