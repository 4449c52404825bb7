//! The Ray Train tutorial's job (seed 000): torchvision's ResNet18 trained from scratch on Tiny
//! ImageNet 200 read as the archive unpacks (`train/<wnid>/images`, `val/images` +
//! `val_annotations.txt`), training images through `RandomHorizontalFlip` +
//! `RandomResizedCrop(224)`, validation images through `Resize(256)` + `CenterCrop(224)`, 64
//! images per rank, 4 loader threads per rank, plain SGD at lr 1e-3, and each epoch's
//! validation loss reported (to the driver under launchers/ray_launch.py, the counterpart of
//! `ray.train.report(loss=...)`; `trainer.fit()`'s result comes back from `ray_launch.launch`).
//! Without --data it generates the stand-in (data-scripts/tiny_imagenet_standin.py).
//!
//! Two deliberate differences from the tutorial: the head has as many outputs as the data set
//! has classes (200; the tutorial keeps `resnet18()`'s 1000, of which 800 are never a target:
//! `--num-classes 1000` restores that), and every rank sees its own shard of the validation set
//! (the tutorial's `prepare_data_loader` does the same; its per-rank accuracy divides by a
//! rounded-down share, here the metrics are exact over all ranks).
//!
//! ```text
//! cargo run --release --example tiny_imagenet -- --data /fsx/tiny-imagenet-200
//! python launchers/ray_launch.py --num-workers 2 --use-gpu --cpus-per-worker 4 -- \
//!     target/release/examples/tiny_imagenet --data /fsx/tiny-imagenet-200
//! torchrun --standalone --nproc-per-node=2 --no-python target/release/examples/tiny_imagenet
//! ```
//!
//! On the small stand-in from scratch on a CPU (10 classes of coloured shapes, 200/50 images):
//! `--small-data --image-size 48 --resize 55 --batch-size 16 --lr 0.02 --momentum 0.9 --epochs 6`
//! reaches about 50% (chance: 10%) in half a minute on 2 cores, as 1 rank or 2.
//!
//! Its own flags: --data, --small-data, --epochs, --batch-size, --lr, --momentum, --image-size,
//! --resize, --num-classes, --weights, --out, --save-every-steps, and --workers' default of 4.
//! The shared ones live in examples/common/mod.rs: `RunArgs` (--device, --seed, --workers,
//! --no-resume, --precision, --channels-last, --clip-grad-norm, --monitor-metric, --early-stop,
//! --requeue, --no-step-log, --ema, --sync-bn, --weight-trail).
//!
//! Exit status: 0 when the run finished, or stopped on Ctrl-C or OUT/STOP; 99 when SIGTERM or
//! SIGUSR1 stopped it (a Slurm time limit or `--signal=USR1@N`, `scancel`, torchrun's SIGTERM):
//! the checkpoint is written and the same command continues the run; with --requeue (a
//! `RunArgs` flag) rank 0 first requeues the Slurm job on SIGUSR1 (examples/slurm/); 1 on an
//! error.
mod common;

use std::path::PathBuf;

use clap::Parser;
use common::RunArgs;
use trainbook::data::Split;
use trainbook::models::load_weights_arg;
use trainbook::prelude::*;

#[derive(Parser, Debug)]
#[command(about = "Train ResNet18 on Tiny ImageNet (the Ray Train tutorial's job)")]
// The tutorial's 4 loader threads per rank instead of the shared flag's 2.
#[command(mut_arg("workers", |a| {
    a.default_value("4").help("Loader threads per rank (the tutorial's num_data_workers)")
}))]
struct Args {
    /// The unpacked tiny-imagenet-200 folder (wnids.txt, train/, val/); generated as a
    /// stand-in if missing.
    #[arg(long, default_value = "data/tiny-imagenet-200")]
    data: PathBuf,
    /// Generate (if missing) and use the small stand-in (10 classes, 20 + 5 images each).
    #[arg(long)]
    small_data: bool,
    #[arg(long, default_value_t = 1)]
    epochs: u64,
    /// Batch size per rank.
    #[arg(long, default_value_t = 64)]
    batch_size: usize,
    #[arg(long, default_value_t = 1e-3)]
    lr: f64,
    /// SGD momentum (the tutorial's SGD has none).
    #[arg(long, default_value_t = 0.0)]
    momentum: f64,
    /// Training crop and validation crop size (RandomResizedCrop / CenterCrop).
    #[arg(long, default_value_t = 224)]
    image_size: u32,
    /// Validation images are resized to this shorter side before the center crop.
    #[arg(long, default_value_t = 256)]
    resize: u32,
    /// Outputs of the head (default: the data set's class count).
    #[arg(long)]
    num_classes: Option<i64>,
    /// Start from these weights: IMAGENET1K_V1 (torchvision's file, from torch.hub's cache or
    /// downloaded into it), or a file (torch.save or safetensors with torchvision names);
    /// random init without it, as the tutorial.
    #[arg(long)]
    weights: Option<PathBuf>,
    #[arg(long, default_value = "runs/tiny_imagenet")]
    out: PathBuf,
    /// Also write a checkpoint every N optimizer steps (mid-epoch).
    #[arg(long)]
    save_every_steps: Option<u64>,
    #[command(flatten)]
    run: RunArgs,
}

fn main() -> std::process::ExitCode {
    common::exit_status("tiny_imagenet", run())
}

fn run() -> anyhow::Result<()> {
    let mut args = Args::parse();
    if args.small_data && args.data == std::path::Path::new("data/tiny-imagenet-200") {
        args.data = PathBuf::from("data/tiny-imagenet-small");
    }
    let dist = args.run.dist()?;
    if dist.is_main() {
        ensure_tiny_imagenet(&args.data, args.small_data)?;
    }
    dist.barrier()?;
    let s = args.image_size;
    let train = TinyImageNet::new(&args.data, Split::Train)?.with_transform(compose![
        RandomHorizontalFlip::new(0.5),
        RandomResizedCrop::new(s),
        ToTensor
    ]);
    let val = TinyImageNet::new(&args.data, Split::Val)?.with_transform(compose![
        Resize::new(args.resize),
        CenterCrop::new(s),
        ToTensor
    ]);
    let classes = args.num_classes.unwrap_or(train.class_names().len() as i64);
    dist.println(format!(
        "Tiny ImageNet: {} train / {} validation images of {} classes (first: {}), {}, device {:?}",
        train.len(),
        val.len(),
        train.class_names().len(),
        train.class_names().first().map_or("-", |c| c.as_str()),
        dist.describe(),
        dist.device()
    ));
    let mut train_loader = DataLoader::new(train, args.batch_size)
        .shuffle(true)
        .seed(args.run.seed)
        .distributed(&dist)
        .num_workers(args.run.workers);
    let mut val_loader =
        DataLoader::new(val, args.batch_size).distributed(&dist).num_workers(args.run.workers);

    tch::manual_seed(args.run.seed as i64);
    let mut vs = VarStore::new(dist.device());
    let net = resnet18(&vs.root(), classes, HeadKind::Linear);
    args.run.sync_batchnorm(&net, &dist)?;
    if let Some(w) = &args.weights {
        let report = load_weights_arg(&mut vs, "resnet18", w, false)?;
        dist.println(format!("loaded {} tensors from {}", report.loaded.len(), w.display()));
    }
    let mut opt = Optimizer::sgd(&vs, args.lr, args.momentum);
    // The shared flags (examples/common) set resume, seed, precision and channels_last.
    let trainer = args.run.metrics(args.run.trainer(&dist), classes as usize)?;
    let run = (&dist, &trainer, (args.out.as_path(), args.weights.is_some()));
    let model = (&mut vs, &net as &dyn tch::nn::ModuleT, &mut opt);
    if args.run.instead_of_training(run, model, (&mut train_loader, &mut val_loader))? {
        return Ok(dist.destroy()?);
    }
    let report = trainer
        .epochs(args.epochs)
        .out(&args.out)
        .checkpoint_every_steps(args.save_every_steps.unwrap_or(0))
        .record_config(serde_json::json!({
            "example": "tiny_imagenet", "epochs": args.epochs, "batch_size": args.batch_size,
            "lr": args.lr, "momentum": args.momentum, "image_size": s, "resize": args.resize,
            "classes": classes, "weights": args.weights
        }))
        .fit(&mut vs, &net, &mut opt, &mut train_loader, &mut val_loader)?;
    // The tutorial's `loss_results`: the validation loss of every epoch.
    let losses: Vec<String> =
        report.history.iter().filter_map(|r| r.val_loss).map(|l| format!("{l:.4}")).collect();
    dist.println(format!(
        "validation loss per epoch: [{}]; best validation accuracy {:.2}%",
        losses.join(", "),
        report.best_val_acc.unwrap_or(0.0) * 100.0
    ));
    dist.destroy()?;
    // Exit status 99 after a stop by SIGTERM/SIGUSR1 (see examples/common).
    common::exit_if_preempted(&report);
    Ok(())
}
