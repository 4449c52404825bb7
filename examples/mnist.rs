//! The course's MNIST program: a small CNN trained with Adam, evaluated on the test set every
//! epoch; rank 0 writes metrics.jsonl, curves.png, confusion.png and model.safetensors under
//! --out. The same binary runs alone or as one rank of a data-parallel job:
//!
//!     torchrun --standalone --nproc-per-node=2 --no-python target/release/examples/mnist
//! Expected: about 97.5-98% test accuracy after the default 8 epochs on the offline 8,000/2,000
//! MNIST (under a minute on 2 CPU cores), ~99% on the canonical 60,000/10,000.
//!
//!     cargo run --release --example mnist
use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context};
use clap::Parser;
use tch::nn::VarStore;
use tch::Device;
use trainbook::compose;
use trainbook::data::{DataLoader, Dataset, DistributedSampler, Mnist};
use trainbook::dist::{Ddp, Dist, DistOptions};
use trainbook::models::{save_safetensors, MnistNet};
use trainbook::notebook::{confusion_matrix_plot, loss_accuracy_curves};
use std::cell::RefCell;

use trainbook::checkpoint::{Checkpointer, Policy, TrainState};
use trainbook::train::{append_record, evaluate, read_records, train_epoch, CrossEntropyLoss, EpochOptions, EpochRecord, Mode, Optimizer, RunningMetrics, StepInfo};
use trainbook::transforms::{Normalize, ToTensor};

#[derive(Parser, Debug)]
#[command(about = "Train the course's MNIST CNN")]
struct Args {
    /// Directory with the MNIST IDX files (built by data-scripts/mnist.py if missing).
    #[arg(long, default_value = "data/mnist")]
    data: PathBuf,
    #[arg(long, default_value_t = 8)]
    epochs: u64,
    #[arg(long, default_value_t = 64)]
    batch_size: usize,
    #[arg(long, default_value_t = 1e-3)]
    lr: f64,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Output directory for metrics, plots and the model.
    #[arg(long, default_value = "runs/mnist")]
    out: PathBuf,
    /// cpu, cuda, or auto (CUDA when available).
    #[arg(long, default_value = "auto")]
    device: String,
    /// Loader threads.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Write a checkpoint every N epochs (0: never).
    #[arg(long, default_value_t = 1)]
    save_every: u64,
    /// Also write a checkpoint every N optimizer steps (mid-epoch).
    #[arg(long)]
    save_every_steps: Option<u64>,
    /// Checkpoints to keep in OUT/checkpoints.
    #[arg(long, default_value_t = 2)]
    keep_last: usize,
    /// Start fresh even if OUT/checkpoints holds a checkpoint.
    #[arg(long)]
    no_resume: bool,
}

/// `None` lets `Dist` pick: CUDA device LOCAL_RANK when available, else the CPU.
fn device(name: &str) -> anyhow::Result<Option<Device>> {
    Ok(match name {
        "cpu" => Some(Device::Cpu),
        "cuda" => Some(Device::Cuda(0)),
        "auto" => None,
        other => bail!("--device {other}: expected cpu, cuda or auto"),
    })
}

fn ensure_data(dir: &PathBuf) -> anyhow::Result<()> {
    if dir.join("t10k-labels-idx1-ubyte").exists() || dir.join("MNIST/raw/t10k-labels-idx1-ubyte").exists() {
        return Ok(());
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/data-scripts/mnist.py");
    println!("MNIST not found in {}; running {script}", dir.display());
    let status = Command::new("python3").arg(script).arg(dir).status().with_context(|| format!("running python3 {script}"))?;
    if !status.success() {
        bail!("could not build MNIST; run `python3 data-scripts/mnist.py {}` and retry", dir.display());
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // 1. Join the process group the launcher describes (a world of one without a launcher).
    let dist = Dist::init_with(DistOptions { device: device(&args.device)?, ..Default::default() })?;
    let device = dist.device();
    if dist.is_main() {
        ensure_data(&args.data)?;
    }
    dist.barrier()?;
    let transform = || compose![ToTensor, Normalize::new(&[0.1307], &[0.3081])];
    let train = Mnist::new(&args.data, true)?.with_transform(transform());
    let test = Mnist::new(&args.data, false)?.with_transform(transform());
    dist.println(format!("MNIST: {} training / {} test images, {} rank(s), device {device:?}", train.len(), test.len(), dist.world_size()));
    let classes = train.classes();
    // 2. Each rank sees its own share of every epoch.
    let train_sampler = DistributedSampler::new(train.len(), dist.world_size(), dist.rank())?.seed(args.seed);
    let test_sampler = DistributedSampler::new(test.len(), dist.world_size(), dist.rank())?.shuffle(false);
    let mut train_loader = DataLoader::new(train, args.batch_size).sampler(train_sampler).seed(args.seed).num_workers(args.workers);
    let mut test_loader = DataLoader::new(test, 1000).sampler(test_sampler).num_workers(args.workers);

    // 3. Wrap the model: rank 0's initial weights go to every rank, gradients are averaged.
    tch::manual_seed(args.seed as i64);
    let mut vs = VarStore::new(device);
    let net = MnistNet::new(&vs.root());
    let ddp = Ddp::wrap(&vs, &dist)?;
    tch::manual_seed(args.seed as i64 + dist.rank() as i64); // distinct dropout masks per rank
    let mut opt = Optimizer::adam(&vs, args.lr);
    let loss_fn = CrossEntropyLoss::new();
    let log = args.out.join("metrics.jsonl");
    let config = serde_json::json!({"epochs": args.epochs, "batch_size": args.batch_size, "lr": args.lr, "seed": args.seed});

    // 4. Resume from the newest intact checkpoint, if any (e.g. after torchrun restarted us).
    let policy = Policy { every_epochs: (args.save_every > 0).then_some(args.save_every), every_steps: args.save_every_steps, keep_last: args.keep_last, best: Some(Mode::Max) };
    let mut ckpt = Checkpointer::new(args.out.join("checkpoints"), policy);
    let (mut start_epoch, mut skip, mut start_metrics) = (0, 0, RunningMetrics::default());
    let mut history: Vec<EpochRecord> = Vec::new();
    if !args.no_resume {
        if let Some(c) = ckpt.latest(&dist)? {
            let at = ckpt.restore(&c, &dist, &mut vs, &mut opt)?;
            dist.println(format!("resuming from {} (epoch {}, {} batches done, step {})", at.dir.display(), at.epoch + 1, at.batches_done, at.global_step));
            (start_epoch, skip, start_metrics) = (at.epoch, at.batches_done as usize, at.epoch_metrics);
            if log.exists() {
                history = read_records(&log)?.into_iter().filter(|r| r.epoch < start_epoch).collect();
            }
        }
    }
    if dist.is_main() {
        std::fs::create_dir_all(&args.out)?;
        let _ = std::fs::remove_file(&log);
        for r in &history {
            append_record(&log, r)?;
        }
    }
    let ckpt = RefCell::new(ckpt);
    for epoch in start_epoch..args.epochs {
        train_loader.set_epoch(epoch);
        train_loader.skip_batches(std::mem::take(&mut skip));
        let on_step = |info: &StepInfo| -> trainbook::Result<()> {
            let state = TrainState { vs: &vs, optimizer: info.optimizer, scheduler: serde_json::Value::Null, epoch, batches_done: info.batches_done as u64, epoch_metrics: info.metrics, seed: args.seed, config: config.clone() };
            ckpt.borrow_mut().after_step(&dist, &state).map(|_| ())
        };
        let opts = EpochOptions::on(device).hooks(&ddp).on_step(&on_step).start_metrics(std::mem::take(&mut start_metrics));
        let t = train_epoch(&net, &mut train_loader, &mut opt, &loss_fn, &opts)?;
        let v = evaluate(&net, &mut test_loader, &loss_fn, &opts)?;
        dist.println(format!("epoch {}/{}: train loss {:.4} acc {:.2}% | test loss {:.4} acc {:.2}% | {:.0} img/s", epoch + 1, args.epochs, t.loss, t.accuracy * 100.0, v.loss, v.accuracy * 100.0, t.img_per_s));
        let record = EpochRecord { epoch, train_loss: t.loss, train_acc: t.accuracy, val_loss: Some(v.loss), val_acc: Some(v.accuracy), lr: opt.lr(), world_size: dist.world_size(), seconds: t.seconds + v.seconds, img_per_s: t.img_per_s };
        // 5. Only rank 0 writes files; every rank takes part in checkpoints (RNG states, barrier).
        if dist.is_main() {
            append_record(&log, &record)?;
            if epoch + 1 == args.epochs {
                if let Some(cm) = &v.confusion {
                    confusion_matrix_plot(cm, &classes)?.save(args.out.join("confusion.png"))?;
                }
            }
        }
        history.push(record);
        let state = TrainState { vs: &vs, optimizer: &opt, scheduler: serde_json::Value::Null, epoch: epoch + 1, batches_done: 0, epoch_metrics: RunningMetrics::default(), seed: args.seed, config: config.clone() };
        ckpt.borrow_mut().after_epoch(&dist, &state, epoch, Some(v.accuracy))?;
    }
    if dist.is_main() {
        loss_accuracy_curves(&history)?.save(args.out.join("curves.png"))?;
        save_safetensors(&vs, &args.out.join("model.safetensors"))?;
        println!("wrote {}/{{metrics.jsonl, curves.png, confusion.png, model.safetensors}}", args.out.display());
    }
    // 6. Leave the group cleanly.
    dist.destroy()?;
    Ok(())
}
