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
use trainbook::train::{append_record, evaluate, train_epoch, CrossEntropyLoss, EpochOptions, EpochRecord, Optimizer};
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
    let vs = VarStore::new(device);
    let net = MnistNet::new(&vs.root());
    let ddp = Ddp::wrap(&vs, &dist)?;
    tch::manual_seed(args.seed as i64 + dist.rank() as i64); // distinct dropout masks per rank
    let mut opt = Optimizer::adam(&vs, args.lr);
    let loss_fn = CrossEntropyLoss::new();
    let opts = EpochOptions::on(device).hooks(&ddp);
    let log = args.out.join("metrics.jsonl");
    if dist.is_main() {
        std::fs::create_dir_all(&args.out)?;
        let _ = std::fs::remove_file(&log);
    }
    let mut history = Vec::new();
    for epoch in 0..args.epochs {
        train_loader.set_epoch(epoch);
        let t = train_epoch(&net, &mut train_loader, &mut opt, &loss_fn, &opts)?;
        let v = evaluate(&net, &mut test_loader, &loss_fn, &opts)?;
        dist.println(format!("epoch {}/{}: train loss {:.4} acc {:.2}% | test loss {:.4} acc {:.2}% | {:.0} img/s", epoch + 1, args.epochs, t.loss, t.accuracy * 100.0, v.loss, v.accuracy * 100.0, t.img_per_s));
        let record = EpochRecord { epoch, train_loss: t.loss, train_acc: t.accuracy, val_loss: Some(v.loss), val_acc: Some(v.accuracy), lr: opt.lr(), world_size: dist.world_size(), seconds: t.seconds + v.seconds, img_per_s: t.img_per_s };
        // 4. Only rank 0 writes files.
        if dist.is_main() {
            append_record(&log, &record)?;
            if epoch + 1 == args.epochs {
                if let Some(cm) = &v.confusion {
                    confusion_matrix_plot(cm, &classes)?.save(args.out.join("confusion.png"))?;
                }
            }
        }
        history.push(record);
    }
    if dist.is_main() {
        loss_accuracy_curves(&history)?.save(args.out.join("curves.png"))?;
        save_safetensors(&vs, &args.out.join("model.safetensors"))?;
        println!("wrote {}/{{metrics.jsonl, curves.png, confusion.png, model.safetensors}}", args.out.display());
    }
    // 5. Leave the group cleanly.
    dist.destroy()?;
    Ok(())
}
