//! The course's DesignSafe classifier: ResNet34 with a 3-class MLP head (C0/C2/C4 damage) on
//! `Dataset_2/{Train,Validation}`, AutoAugment + Resize((244, 244)) on training images, label
//! smoothing 0.1, Adam 1e-4, ReduceLROnPlateau(factor 0.1, patience 5, min_lr 1e-8) on the
//! validation loss, best-accuracy checkpoint, resumable. Without --data it generates the
//! stand-in set (data-scripts/designsafe_standin.py). With ImageNet weights
//! (data-scripts/resnet_weights.py --depth 34) and the real set, expect the course's ~85-90%.
//! From random weights on the small stand-in (`--small-data --image-size 64 --epochs 8
//! --lr 1e-3`: 450/90 images) it reaches about 60% (chance: 33%) in under a minute on 2 CPU cores.
//!
//!     cargo run --release --example designsafe -- --weights data/weights/resnet34.safetensors
//!     torchrun --standalone --nproc-per-node=4 --no-python target/release/examples/designsafe --device cuda
//!
//! Its own flags: --data, --small-data, --epochs, --batch-size, --lr, --label-smoothing,
//! --image-size, --weights, --freeze, --out. The shared ones live in examples/common/mod.rs:
//! `RunArgs` (--device, --seed, --workers, --no-resume, --precision, --channels-last,
//! --clip-grad-norm, --monitor-metric, --early-stop, --requeue, --no-step-log, --ema, --sync-bn, --weight-trail) and
//! `FitArgs` (--save-every, --save-every-steps, --keep-last, --accumulate,
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
use trainbook::models::load_weights_arg;
use trainbook::prelude::*;

#[derive(Parser, Debug)]
#[command(about = "Train the course's ResNet34 hurricane-damage classifier")]
struct Args {
    /// Directory holding Train/ and Validation/ (generated as a stand-in if missing).
    #[arg(long, default_value = "data/designsafe/Dataset_2")]
    data: PathBuf,
    /// Generate (if missing) and use a small stand-in (450/90 images of 160x120) instead.
    #[arg(long)]
    small_data: bool,
    #[arg(long, default_value_t = 5)]
    epochs: u64,
    /// Batch size per rank.
    #[arg(long, default_value_t = 16)]
    batch_size: usize,
    #[arg(long, default_value_t = 1e-4)]
    lr: f64,
    #[arg(long, default_value_t = 0.1)]
    label_smoothing: f64,
    /// Images are resized to SIZE x SIZE (the course: 244).
    #[arg(long, default_value_t = 244)]
    image_size: u32,
    /// Pretrained backbone: IMAGENET1K_V1 (torchvision's file, from torch.hub's cache or
    /// downloaded into it), or a file (torch.save or safetensors, torchvision names); random
    /// init without it.
    #[arg(long)]
    weights: Option<PathBuf>,
    /// Train only the head (fc.*), keeping the backbone fixed.
    #[arg(long)]
    freeze: bool,
    /// Keep every decoded picture in memory after its first read: later epochs transform it
    /// without reading and decoding the file again, and see the same bytes (torchvision's
    /// --cache-dataset saves the scanned file list instead).
    #[arg(long)]
    cache_dataset: bool,
    #[arg(long, default_value = "runs/designsafe")]
    out: PathBuf,
    #[command(flatten)]
    run: RunArgs,
    #[command(flatten)]
    fit: FitArgs,
}

fn main() -> std::process::ExitCode {
    common::exit_status("designsafe", run())
}

fn run() -> anyhow::Result<()> {
    let mut args = Args::parse();
    if args.small_data && args.data == std::path::Path::new("data/designsafe/Dataset_2") {
        args.data = PathBuf::from("data/designsafe-small/Dataset_2");
    }
    let dist = args.run.dist()?;
    if dist.is_main() {
        ensure_designsafe(&args.data, args.small_data)?;
    }
    dist.barrier()?;
    let s = args.image_size;
    let folder = |dir: &str| -> trainbook::Result<ImageFolder> {
        let folder = ImageFolder::new(args.data.join(dir))?;
        Ok(if args.cache_dataset { folder.cache_decoded() } else { folder })
    };
    let train = folder("Train")?.with_transform(compose![
        AutoAugment::imagenet(),
        Resize::new((s, s)),
        ToTensor
    ]);
    let val = folder("Validation")?.with_transform(compose![Resize::new((s, s)), ToTensor]);
    dist.println(format!(
        "DesignSafe: {} train / {} validation images, classes {:?}, {}, device {:?}",
        train.len(),
        val.len(),
        train.classes(),
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
    let net = resnet34_classifier(&vs.root(), 3);
    args.run.sync_batchnorm(&net, &dist)?;
    if let Some(w) = &args.weights {
        let report = load_weights_arg(&mut vs, "resnet34", w, false)?;
        dist.println(format!(
            "loaded {} tensors from {}; new head: {:?}",
            report.loaded.len(),
            w.display(),
            report.missing
        ));
    }
    freeze_backbone(&vs, args.freeze);
    let mut opt = Optimizer::adam(&vs, args.lr);
    // The shared flags (examples/common) set resume, seed, precision, channels_last, the
    // checkpoint cadence, gradient accumulation and DDP's options.
    let trainer = args.fit.apply(args.run.trainer(&dist));
    let trainer = args.run.metrics(trainer, train_loader.dataset().classes().len())?;
    let run = (&dist, &trainer, (args.out.as_path(), args.weights.is_some()));
    let model = (&mut vs, &net as &dyn tch::nn::ModuleT, &mut opt);
    if args.run.instead_of_training(run, model, (&mut train_loader, &mut val_loader))? {
        return Ok(dist.destroy()?);
    }
    let report = trainer
        .epochs(args.epochs)
        .out(&args.out)
        .plateau(
            ReduceLROnPlateau::new(args.run.plateau_mode()).factor(0.1).patience(5).min_lr(1e-8),
        )
        .record_config(serde_json::json!({
            "example": "designsafe", "epochs": args.epochs, "batch_size": args.batch_size,
            "lr": args.lr, "label_smoothing": args.label_smoothing, "image_size": s,
            "freeze": args.freeze, "weights": args.weights
        }))
        .loss(CrossEntropyLoss::new().label_smoothing(args.label_smoothing))
        .fit(&mut vs, &net, &mut opt, &mut train_loader, &mut val_loader)?;
    if let (Some(best), Some(cm)) = (report.best_val_acc, &report.confusion) {
        let per_class: Vec<String> =
            cm.per_class_accuracy().iter().map(|a| format!("{:.1}%", a * 100.0)).collect();
        dist.println(format!(
            "best validation accuracy {:.2}%; last epoch per class (C0, C2, C4): {}",
            best * 100.0,
            per_class.join(", ")
        ));
    }
    dist.destroy()?;
    // Exit status 99 after a stop by SIGTERM/SIGUSR1 (see examples/common).
    common::exit_if_preempted(&report);
    Ok(())
}
