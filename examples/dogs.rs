//! The Dask tutorial's job (seed 002): torchvision's ResNet50 with ImageNet's 1000-way head
//! trained on Stanford Dogs read from its image folders (`Images/n02085620-Chihuahua/...`),
//! every breed's label moved onto its ImageNet index (`class_to_imagenet.tsv`), images through
//! `Resize(256)` + `CenterCrop(250)`, a random train/test split of `--train-pct` 0.8, batches of
//! 100, SGD lr 0.01 with momentum 0.9, `ReduceLROnPlateau(mode='min', patience=2)`, and the
//! softmax confidence of each prediction. Under launchers/dask_launch.py (one rank per Dask
//! worker, `dispatch.run`'s counterpart) each rank's future returns its epoch reports and
//! result. Without --data it generates the stand-in (data-scripts/stanford_dogs_standin.py);
//! data-scripts/stanford_dogs.py fetches the real set and writes its class_to_imagenet.tsv.
//!
//! Where this differs from the tutorial, on purpose:
//! - the test loader reads the test split (the tutorial's passes the *training* sampler to both
//!   loaders, so its "evaluation" measures training images);
//! - the split is drawn from `--seed` with torch's `random_split`, so every rank holds the same
//!   split (the tutorial shuffles with NumPy's unseeded global generator on each worker, so the
//!   workers' train and test sets differ and overlap), and each rank trains on its own shard of
//!   the training split (the tutorial's `SubsetRandomSampler` is not sharded: every worker
//!   walks the whole split);
//! - the plateau schedule watches the validation loss (the tutorial steps it with the last
//!   training batch's loss);
//! - the tutorial's text loads `resnet50(pretrained=True)`, its code `pretrained=False`: random
//!   weights here unless --weights (data-scripts/resnet_weights.py --depth 50).
//!
//! ```text
//! cargo run --release --example dogs -- --data data/stanford-dogs --weights data/weights/resnet50.safetensors
//! python launchers/dask_launch.py --scheduler tcp://head:8786 --num-workers 4 --resources GPU=1 -- \
//!     target/release/examples/dogs --data /shared/stanford-dogs
//! ```
//!
//! On the small stand-in from scratch on a CPU (6 breeds, 192/48 images): `--small-data
//! --resize 64 --image-size 56 --epochs 6 --batch-size 16` reaches 55-60% (chance: 1/6) in about
//! a minute on 2 cores, as 1 rank or 2.
//!
//! Its own flags: --data, --small-data, --class-map, --no-remap, --train-pct, --epochs,
//! --batch-size, --lr, --momentum, --patience, --resize, --image-size, --weights, --out, and
//! --seed's help (it also draws the split). The shared ones live in examples/common/mod.rs:
//! `RunArgs` (--device, --seed, --workers, --no-resume, --precision, --channels-last,
//! --clip-grad-norm, --monitor-metric, --early-stop, --requeue, --no-step-log, --ema, --sync-bn, --weight-trail).
//!
//! Exit status: 0 when the run finished, or stopped on Ctrl-C or OUT/STOP; 99 when SIGTERM or
//! SIGUSR1 stopped it (a Slurm time limit or `--signal=USR1@N`, `scancel`, torchrun's SIGTERM):
//! the checkpoint is written and the same command continues the run; with --requeue (a
//! `RunArgs` flag) rank 0 first requeues the Slurm job on SIGUSR1 (examples/slurm/); 1 on an
//! error.
mod common;

use std::path::PathBuf;
use std::sync::Arc;

use clap::Parser;
use common::RunArgs;
use trainbook::models::load_weights_arg;
use trainbook::prelude::*;

#[derive(Parser, Debug)]
#[command(
    about = "Train ResNet50 on Stanford Dogs with ImageNet's labels (the Dask tutorial's job)"
)]
// Here --seed also draws the train/test split.
#[command(mut_arg("seed", |a| a.help("Seed of the split, the shuffling and the initial weights")))]
struct Args {
    /// Folder holding Images/<wnid>-<breed>/ (and class_to_imagenet.tsv); generated as a
    /// stand-in if missing.
    #[arg(long, default_value = "data/stanford-dogs")]
    data: PathBuf,
    /// Generate (if missing) and use the small stand-in (6 breeds x 40 images).
    #[arg(long)]
    small_data: bool,
    /// Breed folder -> ImageNet index map (default: DATA/class_to_imagenet.tsv).
    #[arg(long)]
    class_map: Option<PathBuf>,
    /// Keep the folders' own labels 0..breeds-1 and a head of that width instead.
    #[arg(long)]
    no_remap: bool,
    /// Fraction of the images used for training; the rest is the test split.
    #[arg(long, default_value_t = 0.8)]
    train_pct: f64,
    #[arg(long, default_value_t = 100)]
    epochs: u64,
    /// Batch size per rank.
    #[arg(long, default_value_t = 100)]
    batch_size: usize,
    #[arg(long, default_value_t = 0.01)]
    lr: f64,
    #[arg(long, default_value_t = 0.9)]
    momentum: f64,
    /// ReduceLROnPlateau's patience (epochs without a lower validation loss).
    #[arg(long, default_value_t = 2)]
    patience: u64,
    /// Shorter side after Resize.
    #[arg(long, default_value_t = 256)]
    resize: u32,
    /// CenterCrop size.
    #[arg(long, default_value_t = 250)]
    image_size: u32,
    /// ImageNet weights: IMAGENET1K_V1, IMAGENET1K_V2 or DEFAULT (torchvision's files, from
    /// torch.hub's cache or downloaded into it), or a file (torch.save or safetensors,
    /// torchvision names); random init without it.
    #[arg(long)]
    weights: Option<PathBuf>,
    /// Keep every decoded picture in memory after its first read: later epochs transform it
    /// without reading and decoding the file again, and see the same bytes (torchvision's
    /// --cache-dataset saves the scanned file list instead).
    #[arg(long)]
    cache_dataset: bool,
    #[arg(long, default_value = "runs/dogs")]
    out: PathBuf,
    #[command(flatten)]
    run: RunArgs,
}

fn main() -> std::process::ExitCode {
    common::exit_status("dogs", run())
}

fn run() -> anyhow::Result<()> {
    let mut args = Args::parse();
    if args.small_data && args.data == std::path::Path::new("data/stanford-dogs") {
        args.data = PathBuf::from("data/stanford-dogs-small");
    }
    if !(args.train_pct > 0.0 && args.train_pct < 1.0) {
        anyhow::bail!("--train-pct must be between 0 and 1 (exclusive), got {}", args.train_pct);
    }
    let dist = args.run.dist()?;
    if dist.is_main() {
        ensure_stanford_dogs(&args.data, args.small_data)?;
    }
    dist.barrier()?;
    let mut folder = ImageFolder::new(args.data.join("Images"))?;
    if args.cache_dataset {
        folder = folder.cache_decoded();
    }
    let folder = folder.with_transform(compose![
        Resize::new(args.resize),
        CenterCrop::new(args.image_size),
        ToTensor
    ]);
    let breeds = folder.readable_classes();
    let whole: Arc<dyn Dataset> = if args.no_remap {
        Arc::new(folder)
    } else {
        let map = args.class_map.clone().unwrap_or_else(|| args.data.join("class_to_imagenet.tsv"));
        Arc::new(Relabel::from_file(folder, &map)?)
    };
    // ImageNet's 1000 outputs (the breeds are a few of them); with --no-remap, one per breed.
    let classes = if args.no_remap { whole.classes().len() as i64 } else { 1000 };
    if whole.classes().len() as i64 > classes {
        anyhow::bail!(
            "the class map gives indices up to {}; ImageNet has 1000",
            whole.classes().len() - 1
        );
    }
    // The tutorial's split: floor(len * train_pct) for training, the rest for testing.
    let n_train = (whole.len() as f64 * args.train_pct).floor() as usize;
    let mut parts =
        random_split(whole.clone(), vec![n_train, whole.len() - n_train], args.run.seed)?;
    let (test, train) = (parts.pop().expect("two parts"), parts.pop().expect("two parts"));
    dist.println(format!(
        "Stanford Dogs: {} breeds ({} ...), {} train / {} test images, {classes} outputs, {}, device {:?}",
        breeds.len(),
        breeds.iter().take(3).cloned().collect::<Vec<_>>().join(", "),
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
        DataLoader::new(test, args.batch_size).distributed(&dist).num_workers(args.run.workers);

    tch::manual_seed(args.run.seed as i64);
    let mut vs = VarStore::new(dist.device());
    let net = resnet50(&vs.root(), classes, HeadKind::Linear);
    args.run.sync_batchnorm(&net, &dist)?;
    if let Some(w) = &args.weights {
        let report = load_weights_arg(&mut vs, "resnet50", w, classes == 1000)?;
        dist.println(format!("loaded {} tensors from {}", report.loaded.len(), w.display()));
    }
    let mut opt = Optimizer::sgd(&vs, args.lr, args.momentum);
    // The shared flags (examples/common) set resume, seed, precision and channels_last.
    let trainer = args.run.metrics(args.run.trainer(&dist), classes as usize)?;
    let run = (&dist, &trainer, (args.out.as_path(), args.weights.is_some()));
    let model = (&mut vs, &net as &dyn tch::nn::ModuleT, &mut opt);
    if args.run.instead_of_training(run, model, (&mut train_loader, &mut test_loader))? {
        return Ok(dist.destroy()?);
    }
    let report = trainer
        .epochs(args.epochs)
        .out(&args.out)
        .plateau(ReduceLROnPlateau::new(args.run.plateau_mode()).patience(args.patience))
        .record_config(serde_json::json!({
            "example": "dogs", "epochs": args.epochs, "batch_size": args.batch_size,
            "lr": args.lr, "momentum": args.momentum, "train_pct": args.train_pct,
            "resize": args.resize, "image_size": args.image_size, "outputs": classes,
            "weights": args.weights
        }))
        .fit(&mut vs, &net, &mut opt, &mut train_loader, &mut test_loader)?;

    // The tutorial's per-prediction confidence: the first test images' predicted breed and the
    // softmax probability of it (over all outputs).
    if dist.is_main() {
        let names = test_loader.dataset().classes();
        let batch = test_loader.iter().next().transpose()?;
        if let Some(batch) = batch {
            let images = batch.images.to_device(dist.device());
            let labels = Vec::<i64>::try_from(&batch.labels)?;
            for (p, truth) in predict(&net, &images)?.iter().zip(labels).take(6) {
                let name = |i: i64| {
                    names.get(i as usize).map_or(i.to_string(), |n| readable_class_name(n))
                };
                println!(
                    "predicted {} ({:.1}% confident), true {}",
                    name(p.class),
                    p.confidence * 100.0,
                    name(truth)
                );
            }
        }
    }
    if let Some(best) = report.best_val_acc {
        dist.println(format!("best test accuracy {:.2}%", best * 100.0));
    }
    dist.destroy()?;
    // Exit status 99 after a stop by SIGTERM/SIGUSR1 (see examples/common).
    common::exit_if_preempted(&report);
    Ok(())
}
