//! torchvision's classification reference (`references/classification/train.py`) as a
//! trainbook program: its flags, with their names, defaults and meanings, on any ImageFolder
//! (`DATA/train/<class>/*.jpg`, `DATA/val/<class>/*.jpg`), so that a published torchvision
//! recipe runs as it is written, under torchrun as well:
//!
//! ```text
//! torchrun --nproc-per-node=8 --no-python target/release/examples/classify \
//!     --data-path /data/imagenet --model resnet50 --batch-size 128 --lr 0.5 \
//!     --lr-scheduler cosineannealinglr --lr-warmup-epochs 5 --lr-warmup-method linear \
//!     --auto-augment ta_wide --epochs 600 --random-erase 0.1 --weight-decay 0.00002 \
//!     --norm-weight-decay 0.0 --label-smoothing 0.1 --mixup-alpha 0.2 --cutmix-alpha 1.0 \
//!     --train-crop-size 176 --model-ema --val-resize-size 232 --ra-sampler --ra-reps 4
//! ```
//!
//! The book's page "torchvision's recipe, flag for flag" (docs/src/torchvision-recipe.md)
//! lists every flag of the reference: what it does here, its test, and the few that are not
//! supported and why. What trainbook adds: a run stopped by SIGTERM/SIGUSR1 (exit status 99)
//! or killed continues from OUTPUT_DIR/checkpoints when the same command runs again;
//! `--small-data` generates a small stand-in (three classes of the DesignSafe stand-in's
//! pictures) under DATA; `--seed`; the weights are also written as OUTPUT_DIR/model.pth, a
//! state dict that `torch.load` reads and torchvision's model loads.
mod common;

mod classify_parts;

use std::path::PathBuf;

use clap::Parser;
use classify_parts::{build_model, eval_transform, optimizer, schedule, train_transform};
use trainbook::dist::DistOptions;
use trainbook::prelude::*;
use trainbook::train::Precision;
use trainbook::train::{torchvision_ema_decay, EmaCadence};

/// The reference's flags (torchvision 0.28's `get_args_parser`), then trainbook's own few.
#[derive(Parser, Debug)]
#[command(about = "Train an image classifier with torchvision's classification reference's flags")]
pub struct Args {
    /// Dataset folder with train/ and val/ ImageFolders.
    #[arg(long, default_value = "data/classify")]
    pub data_path: PathBuf,
    /// Model name (torchvision's): resnet18 .. resnet152, resnext*, wide_resnet*, mobilenet_v2,
    /// mobilenet_v3_large/small, efficientnet_b0..b7, efficientnet_v2_s/m/l,
    /// convnext_tiny/small/base/large, densenet121/161/169/201, vgg11/13/16/19 (and _bn),
    /// alexnet, squeezenet1_0/1_1, regnet_y_* and regnet_x_* (400mf .. 128gf), vit_b_16,
    /// vit_b_32, vit_l_16, vit_l_32, vit_h_14 (built for --train-crop-size images, which
    /// --val-crop-size must equal), shufflenet_v2_x0_5/x1_0/x1_5/x2_0, mnasnet0_5/0_75/1_0/1_3.
    #[arg(long, default_value = "resnet18")]
    pub model: String,
    /// auto (CUDA device LOCAL_RANK when available), cpu or cuda (torchvision: cuda).
    #[arg(long, default_value = "auto")]
    pub device: String,
    /// Images per process; the total batch is the process count times this.
    #[arg(short = 'b', long, default_value_t = 32)]
    pub batch_size: usize,
    #[arg(long, default_value_t = 90)]
    pub epochs: u64,
    /// Loader threads per process.
    #[arg(short = 'j', long, default_value_t = 16)]
    pub workers: usize,
    /// sgd, sgd_nesterov, rmsprop (eps 0.0316, alpha 0.9) or adamw.
    #[arg(long, default_value = "sgd")]
    pub opt: String,
    #[arg(long, default_value_t = 0.1)]
    pub lr: f64,
    #[arg(long, default_value_t = 0.9)]
    pub momentum: f64,
    #[arg(long = "wd", visible_alias = "weight-decay", default_value_t = 1e-4)]
    pub weight_decay: f64,
    /// Weight decay of the normalisation layers' parameters (default: --wd's).
    #[arg(long)]
    pub norm_weight_decay: Option<f64>,
    /// Weight decay of every bias (default: --wd's).
    #[arg(long)]
    pub bias_weight_decay: Option<f64>,
    /// Weight decay of the parameters named `class_token`, `position_embedding` and
    /// `relative_position_bias_table` (the reference's custom keys; of the models here, the
    /// Vision Transformers' `class_token`).
    #[arg(long)]
    pub transformer_embedding_decay: Option<f64>,
    #[arg(long, default_value_t = 0.0)]
    pub label_smoothing: f64,
    #[arg(long, default_value_t = 0.0)]
    pub mixup_alpha: f64,
    #[arg(long, default_value_t = 0.0)]
    pub cutmix_alpha: f64,
    /// steplr, cosineannealinglr or exponentiallr (stepped once per epoch).
    #[arg(long, default_value = "steplr")]
    pub lr_scheduler: String,
    #[arg(long, default_value_t = 0)]
    pub lr_warmup_epochs: u64,
    /// constant or linear.
    #[arg(long, default_value = "constant")]
    pub lr_warmup_method: String,
    #[arg(long, default_value_t = 0.01)]
    pub lr_warmup_decay: f64,
    #[arg(long, default_value_t = 30)]
    pub lr_step_size: u64,
    #[arg(long, default_value_t = 0.1)]
    pub lr_gamma: f64,
    /// The cosine schedule's floor.
    #[arg(long, default_value_t = 0.0)]
    pub lr_min: f64,
    /// Print a line every N training batches (rank 0).
    #[arg(long, default_value_t = 10)]
    pub print_freq: u64,
    /// Where checkpoints, logs and the final weights go.
    #[arg(long, default_value = ".")]
    pub output_dir: PathBuf,
    /// Continue the run of OUTPUT_DIR (its checkpoints/, or OUTPUT_DIR/checkpoint.pth as
    /// torchvision names it; every run continues from there anyway), or start from the model
    /// weights of a torchvision checkpoint.pth.
    #[arg(long)]
    pub resume: Option<PathBuf>,
    /// Must be 0: the epoch to start from comes from the checkpoint.
    #[arg(long, default_value_t = 0)]
    pub start_epoch: u64,
    /// Keep the decoded training and validation pictures in memory after the first epoch.
    #[arg(long)]
    pub cache_dataset: bool,
    /// BatchNorm statistics over all processes (SyncBatchNorm; the ResNet family).
    #[arg(long)]
    pub sync_bn: bool,
    /// Only evaluate (the weights of --weights or --resume, else OUTPUT_DIR's checkpoint).
    #[arg(long)]
    pub test_only: bool,
    /// ra, ta_wide, augmix or imagenet (AutoAugment's ImageNet policy).
    #[arg(long)]
    pub auto_augment: Option<String>,
    #[arg(long, default_value_t = 9)]
    pub ra_magnitude: usize,
    /// AugMix's severity, 1 to 10 (with --auto-augment augmix).
    #[arg(long, default_value_t = 3)]
    pub augmix_severity: u32,
    /// Probability of RandomErasing after normalisation.
    #[arg(long, default_value_t = 0.0)]
    pub random_erase: f64,
    /// float16 autocast with a GradScaler.
    #[arg(long)]
    pub amp: bool,
    /// Processes (torchrun's WORLD_SIZE wins when set, as in torchvision).
    #[arg(long, default_value_t = 1)]
    pub world_size: u64,
    /// Only env:// (the launcher's environment).
    #[arg(long, default_value = "env://")]
    pub dist_url: String,
    /// Validate and save an exponential moving average of the weights too.
    #[arg(long)]
    pub model_ema: bool,
    #[arg(long, default_value_t = 32)]
    pub model_ema_steps: u64,
    #[arg(long, default_value_t = 0.99998)]
    pub model_ema_decay: f64,
    #[arg(long)]
    pub use_deterministic_algorithms: bool,
    /// nearest, bilinear or bicubic (crops, resizes and --auto-augment's geometric operations).
    #[arg(long, default_value = "bilinear")]
    pub interpolation: String,
    #[arg(long, default_value_t = 256)]
    pub val_resize_size: u32,
    #[arg(long, default_value_t = 224)]
    pub val_crop_size: u32,
    #[arg(long, default_value_t = 224)]
    pub train_crop_size: u32,
    #[arg(long)]
    pub clip_grad_norm: Option<f64>,
    /// Repeated augmentation: each picture --ra-reps times per epoch, across the processes.
    #[arg(long)]
    pub ra_sampler: bool,
    #[arg(long, default_value_t = 3)]
    pub ra_reps: usize,
    /// IMAGENET1K_V1, IMAGENET1K_V2 or DEFAULT (torch.hub's cache, downloaded if missing), or
    /// a weights file (torch.save or safetensors).
    #[arg(long)]
    pub weights: Option<String>,
    /// PIL (trainbook's transforms are PIL's; "tensor" is not supported).
    #[arg(long, default_value = "PIL")]
    pub backend: String,
    /// Accepted: MixUp and CutMix are always torchvision.transforms.v2's.
    #[arg(long)]
    pub use_v2: bool,
    /// trainbook: seed of the initial weights, the shuffling and the augmentations.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// trainbook: generate (if missing) and use a small stand-in under --data-path.
    #[arg(long)]
    pub small_data: bool,
}

fn main() -> std::process::ExitCode {
    common::exit_status("classify", run())
}

/// The flags that only have torchvision's value here, checked before anything starts.
fn check_flags(args: &Args) -> anyhow::Result<()> {
    let refuse = |flag: &str, why: &str| Err(anyhow::anyhow!("{flag}: {why}"));
    if args.start_epoch != 0 {
        return refuse("--start-epoch", "the epoch to continue from comes from the checkpoint");
    }
    if args.dist_url != "env://" {
        return refuse("--dist-url", "only env:// (torchrun's or Slurm's environment)");
    }
    if !args.backend.eq_ignore_ascii_case("pil") {
        return refuse("--backend", "only PIL: trainbook's transforms compute what PIL does");
    }
    // The training transforms (--auto-augment and its settings) are built once here, so that a
    // bad policy or severity is named before anything starts.
    train_transform(args, classify_parts::interpolation(&args.interpolation)?)?;
    Ok(())
}

fn run() -> anyhow::Result<()> {
    let args = Args::parse();
    check_flags(&args)?;
    if args.use_deterministic_algorithms {
        trainbook::train::use_deterministic_algorithms(true)?;
    }
    let dist = Dist::init_with(DistOptions::default().with_device_name(&args.device)?)?;
    if args.small_data && dist.is_main() {
        classify_parts::ensure_standin(&args.data_path)?;
    }
    dist.barrier()?;
    let interpolation = classify_parts::interpolation(&args.interpolation)?;
    let weights = args.weights.as_deref().map(|w| w.parse::<trainbook::models::Weights>());
    let named_weights = weights.and_then(|w| w.ok());
    let (resize, crop) = match named_weights {
        // torchvision's `weights.transforms()` with --weights and --test-only.
        Some(w) if args.test_only => w.eval_sizes(&args.model)?,
        _ => (args.val_resize_size, args.val_crop_size),
    };
    let mut train = ImageFolder::new(args.data_path.join("train"))?
        .with_transform(train_transform(&args, interpolation)?);
    let mut val = ImageFolder::new(args.data_path.join("val"))?.with_transform(eval_transform(
        resize,
        crop,
        interpolation,
    ));
    if args.cache_dataset {
        (train, val) = (train.cache_decoded(), val.cache_decoded());
    }
    let classes = train.classes().len() as i64;
    dist.println(format!(
        "{}: {} train / {} val images of {classes} classes, {}, device {:?}",
        args.data_path.display(),
        train.len(),
        val.len(),
        dist.describe(),
        dist.device()
    ));
    let train_len = train.len();
    let mut train_loader =
        DataLoader::new(train, args.batch_size).seed(args.seed).num_workers(args.workers);
    train_loader = match args.ra_sampler && dist.world_size() > 1 {
        true => {
            let ra = trainbook::data::RASampler::for_dist(train_len, &dist, args.ra_reps)?;
            if ra.is_empty() {
                anyhow::bail!(
                    "--ra-sampler: {train_len} training pictures leave each of {} processes \
                     none (the reference's RASampler keeps len // 256 * 256 of them)",
                    dist.world_size()
                );
            }
            train_loader.sampler(ra.seed(args.seed))
        }
        false => train_loader.shuffle(true).distributed(&dist),
    };
    let mut val_loader =
        DataLoader::new(val, args.batch_size).distributed(&dist).num_workers(args.workers);

    tch::manual_seed(args.seed as i64);
    let mut vs = VarStore::new(dist.device());
    if args.model.starts_with("vit_") && crop != args.train_crop_size {
        anyhow::bail!(
            "--model {}: a Vision Transformer takes one image size, but --train-crop-size is {} \
             and the evaluation crop {crop}",
            args.model,
            args.train_crop_size
        );
    }
    let net = build_model(&vs, &args.model, classes, i64::from(args.train_crop_size))?;
    if args.sync_bn && net.sync_batchnorm(&dist)? {
        dist.println(format!("SyncBatchNorm over {} processes", dist.world_size()));
    }
    let mut from_weights = false;
    if let Some(w) = &args.weights {
        let report = trainbook::models::load_weights_arg(
            &mut vs,
            &args.model,
            std::path::Path::new(w),
            true,
        )?;
        dist.println(format!("--weights {w}: {} tensors", report.loaded.len()));
        from_weights = true;
    }
    from_weights |= classify_parts::resume_arg(&args, &mut vs, &dist)?;
    let mut opt = optimizer(&args, &vs)?;

    let world = match std::env::var("WORLD_SIZE") {
        Ok(_) => dist.world_size() as u64,
        Err(_) => args.world_size,
    };
    let loss = CrossEntropyLoss::new().label_smoothing(args.label_smoothing);
    let mut trainer = Trainer::new(&dist)
        .epochs(args.epochs)
        .out(&args.output_dir)
        .resume(true)
        .seed(args.seed)
        .loss(loss)
        .schedule(schedule(&args)?)
        .precision(amp_precision(&args, &dist))
        .cudnn_benchmark(!args.use_deterministic_algorithms && !args.test_only)
        .callback(classify_parts::PrintFreq::new(args.print_freq, &dist));
    if classes > 5 {
        trainer = trainer.top_k(5);
    }
    if args.mixup_alpha > 0.0 || args.cutmix_alpha > 0.0 {
        trainer = trainer.mixup_cutmix(args.mixup_alpha, args.cutmix_alpha);
    }
    if let Some(x) = args.clip_grad_norm {
        trainer = trainer.clip_grad_norm(x);
    }
    if args.model_ema {
        let decay = torchvision_ema_decay(
            args.model_ema_decay,
            world,
            args.batch_size as u64,
            args.model_ema_steps,
            args.epochs,
        );
        let cadence =
            EmaCadence { every_steps: args.model_ema_steps, copy_epochs: args.lr_warmup_epochs };
        trainer = trainer.model_ema_torchvision(decay, cadence);
    }
    trainer = trainer.record_config(serde_json::json!({
        "example": "classify", "argv": std::env::args().skip(1).collect::<Vec<_>>(),
    }));
    if args.test_only {
        let eval = (&mut vs, &net, &mut val_loader);
        classify_parts::test_only(&dist, &trainer, eval, &args, from_weights)?;
        return Ok(dist.destroy()?);
    }
    let report = trainer.fit(&mut vs, &net, &mut opt, &mut train_loader, &mut val_loader)?;
    if dist.is_main() {
        let path = args.output_dir.join("model.pth");
        trainbook::models::save_state_dict(&vs, &path)?;
        println!(
            "wrote {} (torch.load reads it; torchvision's {} loads it)",
            path.display(),
            args.model
        );
    }
    dist.destroy()?;
    common::exit_if_preempted(&report);
    Ok(())
}

/// `--amp`: float16 autocast with a GradScaler on a CUDA device. torchvision's reference
/// enters CUDA's autocast (`torch.cuda.amp.autocast`), which leaves CPU operations in
/// float32, so on the CPU the run stays float32 as it does there (said once on rank 0).
fn amp_precision(args: &Args, dist: &Dist) -> Precision {
    match (args.amp, dist.device().is_cuda()) {
        (true, true) => Precision::F16,
        (true, false) => {
            dist.println(
                "--amp: CUDA's float16 autocast, as in torchvision; on the CPU the run stays float32",
            );
            Precision::F32
        }
        (false, _) => Precision::F32,
    }
}
