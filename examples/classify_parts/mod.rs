//! The pieces of examples/classify.rs that turn torchvision's flags into trainbook's parts:
//! the model by name, the reference's training and evaluation presets
//! (`presets.ClassificationPresetTrain` / `ClassificationPresetEval`), the optimizer with its
//! weight-decay groups, the schedule with its warmup, `--resume`, `--test-only`, the
//! `--print-freq` lines and the `--small-data` stand-in. (A folder of its own, so that Cargo
//! does not take it for an example.)
use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context};
use tch::nn::{ModuleT, VarStore};
use tch::Tensor;
use trainbook::fit::Callback;
use trainbook::models::{
    alexnet, convnext, densenet, efficientnet, mnasnet, mobilenet_v2, mobilenet_v3, regnet,
    resnet_by_name, shufflenet_v2, squeezenet, vgg, vit, HeadKind, ResNet,
};
use trainbook::prelude::*;
use trainbook::train::{Cadence, ParamGroup, SequentialLR, StepLR};
use trainbook::train::{
    ConstantLR, CosineAnnealingLR, ExponentialLR, LinearLR, OptimizerKind, RMSprop, StepRecord,
};
use trainbook::transforms::Compose;
use trainbook::transforms::{
    AugMix, AutoAugment, Interpolation, RandAugment, RandomErasing, Transform, TrivialAugmentWide,
};

use super::Args;

/// A model of torchvision's by name.
pub enum Classifier {
    /// The ResNet family (with SyncBatchNorm).
    ResNet(Box<ResNet>),
    /// A model without BatchNorm (ConvNeXt, the Vision Transformers, AlexNet, VGG without
    /// `_bn`, the SqueezeNets): nothing for `--sync-bn` to convert.
    NoBatchNorm(Box<dyn ModuleT>),
    /// The other models, whose BatchNorm is not synchronised here.
    Other(Box<dyn ModuleT>),
}

impl std::fmt::Debug for Classifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Classifier::ResNet(_) => "Classifier::ResNet",
            Classifier::NoBatchNorm(_) => "Classifier::NoBatchNorm",
            Classifier::Other(_) => "Classifier::Other",
        })
    }
}

impl ModuleT for Classifier {
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        match self {
            Classifier::ResNet(n) => n.forward_t(xs, train),
            Classifier::NoBatchNorm(n) | Classifier::Other(n) => n.forward_t(xs, train),
        }
    }
}

impl Classifier {
    /// `--sync-bn`: the ResNets' BatchNorm over all ranks; a model without BatchNorm has
    /// nothing to convert (as in torchvision); the other models' is not synchronised here (an
    /// error on several processes).
    pub fn sync_batchnorm(&self, dist: &Dist) -> anyhow::Result<bool> {
        match self {
            Classifier::ResNet(n) => Ok(n.convert_sync_batchnorm(dist)?),
            Classifier::NoBatchNorm(_) => Ok(false),
            Classifier::Other(_) if dist.world_size() <= 1 => Ok(false),
            Classifier::Other(_) => {
                bail!("--sync-bn: SyncBatchNorm is available for the ResNet family")
            }
        }
    }
}

/// torchvision's `get_model(name, num_classes=classes)`; a Vision Transformer is built for
/// images of `image_size` (torchvision's is 224 unless given `image_size=`).
pub fn build_model(
    vs: &VarStore,
    name: &str,
    classes: i64,
    image_size: i64,
) -> anyhow::Result<Classifier> {
    let root = vs.root();
    let other: Box<dyn ModuleT> = match name {
        n if n.starts_with("mobilenet_v3") => Box::new(mobilenet_v3(&root, n, classes)?),
        "mobilenet_v2" => Box::new(mobilenet_v2(&root, name, classes)?),
        n if n.starts_with("convnext") => Box::new(convnext(&root, n, classes)?),
        n if n.starts_with("vgg") => Box::new(vgg(&root, n, classes)?),
        "alexnet" => Box::new(alexnet(&root, name, classes)?),
        n if n.starts_with("efficientnet") => Box::new(efficientnet(&root, n, classes)?),
        n if n.starts_with("densenet") => Box::new(densenet(&root, n, classes)?),
        n if n.starts_with("squeezenet") => Box::new(squeezenet(&root, n, classes)?),
        n if n.starts_with("regnet") => Box::new(regnet(&root, n, classes)?),
        n if n.starts_with("vit_") => Box::new(vit(&root, n, classes, image_size)?),
        n if n.starts_with("shufflenet") => Box::new(shufflenet_v2(&root, n, classes)?),
        n if n.starts_with("mnasnet") => Box::new(mnasnet(&root, n, classes)?),
        _ => {
            let net =
                resnet_by_name(&root, name, classes, HeadKind::Linear).with_context(|| {
                    "--model: also mobilenet_v2, mobilenet_v3_large/small, efficientnet_b0..b7, \
                 efficientnet_v2_s/m/l, convnext_tiny/small/base/large, densenet121/161/169/201, \
                 vgg11/13/16/19 (and _bn), alexnet, squeezenet1_0/1_1, regnet_y_400mf.. \
                 regnet_y_128gf, regnet_x_400mf..regnet_x_32gf, vit_b_16/b_32/l_16/l_32/h_14, \
                 shufflenet_v2_x0_5/x1_0/x1_5/x2_0, mnasnet0_5/0_75/1_0/1_3"
                })?;
            return Ok(Classifier::ResNet(Box::new(net)));
        }
    };
    let without_batch_norm =
        ["convnext", "vit_", "alexnet", "squeezenet"].iter().any(|p| name.starts_with(p))
            || (name.starts_with("vgg") && !name.ends_with("_bn"));
    Ok(if without_batch_norm { Classifier::NoBatchNorm(other) } else { Classifier::Other(other) })
}

/// `--interpolation`.
pub fn interpolation(name: &str) -> anyhow::Result<Interpolation> {
    name.parse::<Interpolation>().map_err(|e| anyhow!("--interpolation: {e}"))
}

/// `ClassificationPresetTrain`: RandomResizedCrop, a horizontal flip with chance 1/2, the
/// `--auto-augment` policy (both resampling with `--interpolation`; AugMix with
/// `--augmix-severity`), the tensor, ImageNet's
/// normalisation, then RandomErasing.
pub fn train_transform(args: &Args, interpolation: Interpolation) -> anyhow::Result<Compose> {
    let mut steps: Vec<Box<dyn Transform>> = vec![
        Box::new(RandomResizedCrop::new(args.train_crop_size).interpolation(interpolation)),
        Box::new(RandomHorizontalFlip::new(0.5)),
    ];
    match args.auto_augment.as_deref() {
        None => {}
        Some("ra") => steps.push(Box::new(
            RandAugment::new(2, args.ra_magnitude, 31)?.interpolation(interpolation),
        )),
        Some("ta_wide") => {
            steps.push(Box::new(TrivialAugmentWide::new(31)?.interpolation(interpolation)))
        }
        Some("imagenet") => {
            steps.push(Box::new(AutoAugment::imagenet().interpolation(interpolation)))
        }
        Some("augmix") => steps.push(Box::new(
            AugMix::new(args.augmix_severity as usize, 3, -1, 1.0)?
                .interpolation(interpolation)
                .context("--auto-augment augmix with --interpolation")?,
        )),
        Some(other) => bail!(
            "--auto-augment {other}: ra, ta_wide, augmix or imagenet (AutoAugment's CIFAR10 and \
             SVHN policies are not available)"
        ),
    }
    steps.push(Box::new(ToTensor));
    steps.push(Box::new(Normalize::imagenet()));
    if args.random_erase > 0.0 {
        steps.push(Box::new(RandomErasing::new(args.random_erase as f32)?));
    }
    Ok(Compose::new(steps))
}

/// `ClassificationPresetEval`: the shorter side to `resize`, the centre `crop`, the tensor,
/// ImageNet's normalisation.
pub fn eval_transform(resize: u32, crop: u32, interpolation: Interpolation) -> Compose {
    Compose::new(vec![
        Box::new(Resize::new(resize).interpolation(interpolation)),
        Box::new(CenterCrop::new(crop)),
        Box::new(ToTensor),
        Box::new(Normalize::imagenet()),
    ])
}

/// `--opt` with `--lr`, `--momentum`, `--wd`, and `set_weight_decay`'s groups for
/// `--norm-weight-decay` and `--bias-weight-decay`.
pub fn optimizer(args: &Args, vs: &VarStore) -> anyhow::Result<Optimizer> {
    let (lr, wd) = (args.lr, args.weight_decay);
    let name = args.opt.to_lowercase();
    let mut opt = if name.starts_with("sgd") {
        let nesterov = name.contains("nesterov");
        let kind = OptimizerKind::Sgd {
            momentum: args.momentum,
            dampening: 0.0,
            nesterov,
            weight_decay: wd,
        };
        Optimizer::new(vs, kind, lr)
    } else if name == "rmsprop" {
        let rule = RMSprop {
            alpha: 0.9,
            eps: 0.0316,
            weight_decay: wd,
            momentum: args.momentum,
            centered: false,
        };
        Optimizer::with_rule(vs, Arc::new(rule), lr)
    } else if name == "adamw" {
        Optimizer::new(
            vs,
            OptimizerKind::AdamW { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: wd },
            lr,
        )
    } else {
        bail!("--opt {}: only SGD, RMSprop and AdamW are supported (as in torchvision)", args.opt)
    };
    // The reference's custom keys: `bias`, then the transformers' embeddings.
    let mut custom: Vec<(&str, f64)> =
        args.bias_weight_decay.map(|wd| ("bias", wd)).into_iter().collect();
    if let Some(wd) = args.transformer_embedding_decay {
        for key in ["class_token", "position_embedding", "relative_position_bias_table"] {
            custom.push((key, wd));
        }
    }
    let groups = ParamGroup::torchvision_custom_weight_decay(vs, args.norm_weight_decay, &custom);
    for g in groups {
        opt = opt.param_group(g)?;
    }
    Ok(opt)
}

/// `--lr-scheduler` after the `--lr-warmup-*` warmup (torch's SequentialLR), per epoch.
pub fn schedule(args: &Args) -> anyhow::Result<Box<dyn LrSchedule>> {
    let warmup = args.lr_warmup_epochs;
    let main: Box<dyn LrSchedule> = match args.lr_scheduler.to_lowercase().as_str() {
        "steplr" => Box::new(StepLR::new(args.lr_step_size, args.lr_gamma)),
        "cosineannealinglr" => Box::new(CosineAnnealingLR::new(
            args.lr,
            args.epochs.saturating_sub(warmup),
            args.lr_min,
        )),
        "exponentiallr" => Box::new(ExponentialLR::new(args.lr_gamma)),
        other => bail!(
            "--lr-scheduler {other}: only StepLR, CosineAnnealingLR and ExponentialLR are \
             supported (as in torchvision)"
        ),
    };
    if warmup == 0 {
        return Ok(main);
    }
    let decay = args.lr_warmup_decay;
    let warm: Box<dyn LrSchedule> = match args.lr_warmup_method.as_str() {
        "linear" => Box::new(LinearLR::new(decay, 1.0, warmup).stepping(Cadence::Epoch)),
        "constant" => Box::new(ConstantLR::new(decay, warmup).stepping(Cadence::Epoch)),
        other => bail!("--lr-warmup-method {other}: only linear and constant are supported"),
    };
    Ok(Box::new(SequentialLR::new(vec![warm, main], vec![warmup])))
}

/// `--resume PATH`. A file is a checkpoint (torchvision's `checkpoint.pth`, any `torch.save`
/// state dict, or safetensors) whose model weights are loaded; its optimizer, schedule and
/// epoch are not: the run starts at epoch 0 from these weights, unless OUTPUT_DIR holds a
/// checkpoint of its own, which is later and wins. OUTPUT_DIR itself, a folder in it, or a
/// file name in it that does not exist (torchvision's `OUTPUT_DIR/checkpoint.pth` before
/// the first epoch) name the run that continues from OUTPUT_DIR/checkpoints, as every run
/// does. Anything else is an error.
pub fn resume_arg(args: &Args, vs: &mut VarStore, dist: &Dist) -> anyhow::Result<bool> {
    let Some(path) = &args.resume else { return Ok(false) };
    if path.is_file() {
        let report = trainbook::models::load_weights(vs, path, true)?;
        dist.println(format!(
            "--resume {}: the model's {} tensors (not the optimizer, schedule or epoch)",
            path.display(),
            report.loaded.len()
        ));
        return Ok(true);
    }
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let out = canon(&args.output_dir);
    let inside = match path.exists() {
        true => canon(path).starts_with(&out),
        false => path.parent().is_some_and(|p| canon(p) == out),
    };
    if !inside {
        bail!("--resume {}: no such file, and not in --output-dir", path.display());
    }
    Ok(false)
}

/// `--test-only`: the weights given (`--weights`, a torchvision `--resume` file), else
/// OUTPUT_DIR's latest checkpoint's model or, with `--model-ema`, its average.
pub fn test_only(
    dist: &Dist,
    trainer: &Trainer,
    (vs, net, loader): (&mut VarStore, &Classifier, &mut DataLoader<ImageFolder>),
    args: &Args,
    from_weights: bool,
) -> anyhow::Result<()> {
    use trainbook::checkpoint::{read_tensors_file, EMA_FILE, MODEL_FILE};
    if !from_weights {
        let ckpt = crate::common::checkpoint_to_test(dist, &args.output_dir, None)?;
        let file = if args.model_ema { EMA_FILE } else { MODEL_FILE };
        let tensors = read_tensors_file(&ckpt, file)?
            .ok_or_else(|| anyhow!("{}: no {file}", ckpt.dir.display()))?;
        trainbook::models::load_state_dict(vs, &tensors, true)?;
        dist.println(format!("--test-only: {file} of {}", ckpt.dir.display()));
    }
    let summary = trainer.test(vs, net, loader)?;
    dist.println(format!("Test: {summary}"));
    Ok(())
}

/// `--print-freq N`: rank 0 prints `Epoch: [E]  [I/N]  lr: ..  loss: ..` for every N-th
/// training batch of an epoch (torchvision's `log_every` line, less its timings and
/// accuracies).
pub struct PrintFreq {
    every: u64,
    main: bool,
}

impl PrintFreq {
    /// Lines every `every` batches (0: none), printed on rank 0.
    pub fn new(every: u64, dist: &Dist) -> PrintFreq {
        PrintFreq { every, main: dist.is_main() }
    }
}

impl Callback for PrintFreq {
    fn on_train_steps(&mut self, steps: &[StepRecord]) -> trainbook::Result<()> {
        if !self.main || self.every == 0 {
            return Ok(());
        }
        for s in steps {
            let i = s.batches_done.saturating_sub(1) as u64;
            if i % self.every == 0 {
                println!("Epoch: [{}]  [{i}]  lr: {}  loss: {:.4}", s.epoch, s.lr, s.loss);
            }
        }
        Ok(())
    }
}

/// `--small-data`: DATA/train and DATA/val from the small DesignSafe stand-in (three classes,
/// 450 training and 90 validation pictures of about 160x120), generated once under
/// DATA/designsafe.
pub fn ensure_standin(data: &Path) -> anyhow::Result<()> {
    if data.join("train").is_dir() && data.join("val").is_dir() {
        return Ok(());
    }
    let source = data.join("designsafe");
    trainbook::data::ensure_designsafe(&source, true)?;
    for (link, target) in [("train", "Train"), ("val", "Validation")] {
        let link = data.join(link);
        if !link.exists() {
            std::os::unix::fs::symlink(Path::new("designsafe").join(target), &link)
                .with_context(|| format!("link {}", link.display()))?;
        }
    }
    Ok(())
}
