//! examples/classify.rs, torchvision's classification reference's flags: two published recipes
//! (ResNet50's `IMAGENET1K_V2` line and MobileNetV3-Large's) run as written, with only the
//! sizes, epochs and batch made small, on a small generated ImageFolder for two epochs under
//! torchrun with two processes. Each epoch's learning rate equals what torch's schedulers give
//! when built as the reference builds them (tests/oracle/classify_recipe.py), the `--model-ema`
//! average is validated and saved, `--print-freq` prints its lines, and torchvision's model
//! loads the `model.pth` the run writes; the ResNet50 line with a worker SIGKILLed after its
//! first checkpoint, restarted by torchrun, ends with the uninterrupted run's weights and EMA
//! bit for bit; too few pictures for `--ra-sampler` is an error naming
//! it. The book's table of the reference's flags agrees with the program's `--help`, and the
//! flags it refuses are errors naming them.
use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use trainbook::train::read_records;

fn exe() -> PathBuf {
    common::target_exe("examples/classify")
}

/// ResNet50's `IMAGENET1K_V2` recipe as torchvision's docs publish it.
const RESNET50_V2: &[&str] = &[
    "--model",
    "resnet50",
    "--batch-size",
    "128",
    "--lr",
    "0.5",
    "--lr-scheduler",
    "cosineannealinglr",
    "--lr-warmup-epochs",
    "5",
    "--lr-warmup-method",
    "linear",
    "--auto-augment",
    "ta_wide",
    "--epochs",
    "600",
    "--random-erase",
    "0.1",
    "--weight-decay",
    "0.00002",
    "--norm-weight-decay",
    "0.0",
    "--label-smoothing",
    "0.1",
    "--mixup-alpha",
    "0.2",
    "--cutmix-alpha",
    "1.0",
    "--train-crop-size",
    "176",
    "--model-ema",
    "--val-resize-size",
    "232",
    "--ra-sampler",
    "--ra-reps",
    "4",
];

/// MobileNetV3-Large's recipe as torchvision's docs publish it.
const MOBILENET_V3_LARGE: &[&str] = &[
    "--model",
    "mobilenet_v3_large",
    "--epochs",
    "600",
    "--opt",
    "rmsprop",
    "--batch-size",
    "128",
    "--lr",
    "0.064",
    "--wd",
    "0.00001",
    "--lr-step-size",
    "2",
    "--lr-gamma",
    "0.973",
    "--auto-augment",
    "imagenet",
    "--random-erase",
    "0.2",
];

/// ViT-B/16's recipe as torchvision's docs publish it.
const VIT_B_16: &[&str] = &[
    "--model",
    "vit_b_16",
    "--epochs",
    "300",
    "--batch-size",
    "512",
    "--opt",
    "adamw",
    "--lr",
    "0.003",
    "--wd",
    "0.3",
    "--lr-scheduler",
    "cosineannealinglr",
    "--lr-warmup-method",
    "linear",
    "--lr-warmup-epochs",
    "30",
    "--lr-warmup-decay",
    "0.033",
    "--amp",
    "--label-smoothing",
    "0.11",
    "--mixup-alpha",
    "0.2",
    "--auto-augment",
    "ra",
    "--clip-grad-norm",
    "1",
    "--ra-sampler",
    "--cutmix-alpha",
    "1.0",
    "--model-ema",
];

/// EfficientNet-V2-S's recipe as torchvision's docs publish it (`$TRAIN_SIZE` 300,
/// `$EVAL_SIZE` 384).
const EFFICIENTNET_V2_S: &[&str] = &[
    "--model",
    "efficientnet_v2_s",
    "--batch-size",
    "128",
    "--lr",
    "0.5",
    "--lr-scheduler",
    "cosineannealinglr",
    "--lr-warmup-epochs",
    "5",
    "--lr-warmup-method",
    "linear",
    "--auto-augment",
    "ta_wide",
    "--epochs",
    "600",
    "--random-erase",
    "0.1",
    "--label-smoothing",
    "0.1",
    "--mixup-alpha",
    "0.2",
    "--cutmix-alpha",
    "1.0",
    "--weight-decay",
    "0.00002",
    "--norm-weight-decay",
    "0.0",
    "--train-crop-size",
    "300",
    "--model-ema",
    "--val-crop-size",
    "384",
    "--val-resize-size",
    "384",
    "--ra-sampler",
    "--ra-reps",
    "4",
];

/// The RegNets' "small models" recipe as torchvision's docs publish it, `--flag=value` as
/// written there, for `regnet_x_400mf`.
const REGNET_X_400MF: &[&str] = &[
    "--model",
    "regnet_x_400mf",
    "--epochs",
    "100",
    "--batch-size",
    "128",
    "--wd",
    "0.00005",
    "--lr=0.8",
    "--lr-scheduler=cosineannealinglr",
    "--lr-warmup-method=linear",
    "--lr-warmup-epochs=5",
    "--lr-warmup-decay=0.1",
];

/// `recipe` with the values of `small`'s flags replaced (or added): the same line, made small.
/// A flag written `--flag=value` keeps that form.
fn made_small(recipe: &[&str], small: &[(&str, &str)]) -> Vec<String> {
    let mut out: Vec<String> = recipe.iter().map(|s| s.to_string()).collect();
    for (flag, value) in small {
        let joined = format!("{flag}=");
        if let Some(i) = out.iter().position(|a| a.starts_with(&joined)) {
            out[i] = format!("{joined}{value}");
            continue;
        }
        match out.iter().position(|a| a == flag) {
            Some(i) => out[i + 1] = value.to_string(),
            None => out.extend([flag.to_string(), value.to_string()]),
        }
    }
    out
}

/// 512 training and 64 validation pictures of 3 classes (80x60; the RASampler keeps
/// `len // 256 * 256` indices, so fewer than 256 would leave it none), as DATA/train, DATA/val.
fn stand_in(work: &Path) -> PathBuf {
    stand_in_of(work, 512)
}

/// [`stand_in`] with `train` training pictures.
fn stand_in_of(work: &Path, train: usize) -> PathBuf {
    let source = work.join("designsafe");
    let train = train.to_string();
    let ok = Command::new(common::venv_bin("python"))
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/data-scripts/designsafe_standin.py"))
        .arg(&source)
        .args(["--train", &train, "--val", "64", "--width", "80", "--height", "60"])
        .status()
        .unwrap();
    assert!(ok.success());
    let data = work.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::os::unix::fs::symlink(source.join("Train"), data.join("train")).unwrap();
    std::os::unix::fs::symlink(source.join("Validation"), data.join("val")).unwrap();
    data
}

fn oracle(args: &[&str]) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oracle/classify_recipe.py");
    let out = Command::new(common::venv_bin("python")).arg(script).args(args).output().unwrap();
    assert!(out.status.success(), "classify_recipe.py {args:?}: {}", common::text(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// The value of `flag` in `args` (`--flag value` or `--flag=value`), else `default`.
fn value<'a>(args: &'a [String], flag: &str, default: &'a str) -> &'a str {
    let joined = format!("{flag}=");
    if let Some(v) = args.iter().find_map(|a| a.strip_prefix(joined.as_str())) {
        return v;
    }
    args.iter().position(|a| a == flag).map_or(default, |i| args[i + 1].as_str())
}

/// torch's learning rate of every epoch for the schedule flags of `args`.
fn torch_lrs(args: &[String]) -> Vec<f64> {
    let num = |flag: &str, default: &str| value(args, flag, default).parse::<f64>().unwrap();
    let config = serde_json::json!({
        "lr": num("--lr", "0.1"),
        "epochs": num("--epochs", "90") as u64,
        "lr_scheduler": value(args, "--lr-scheduler", "steplr"),
        "lr_warmup_epochs": num("--lr-warmup-epochs", "0") as u64,
        "lr_warmup_method": value(args, "--lr-warmup-method", "constant"),
        "lr_warmup_decay": num("--lr-warmup-decay", "0.01"),
        "lr_step_size": num("--lr-step-size", "30") as u64,
        "lr_gamma": num("--lr-gamma", "0.1"),
        "lr_min": num("--lr-min", "0"),
    });
    serde_json::from_str(&oracle(&["lrs", &config.to_string()])).unwrap()
}

/// The command that runs `args` under torchrun with two processes into `out`, restarting the
/// group up to `restarts` times.
fn torchrun_command(data: &Path, out: &Path, args: &[String], restarts: u32) -> Command {
    let mut all: Vec<String> = args.to_vec();
    all.extend(["--device", "cpu", "-j", "1", "--print-freq", "4"].map(String::from));
    all.extend(["--data-path".into(), data.display().to_string()]);
    all.extend(["--output-dir".into(), out.display().to_string()]);
    let all: Vec<&str> = all.iter().map(|s| s.as_str()).collect();
    let mut cmd = trainbook::launch::torchrun(2, restarts, &exe(), &all);
    cmd.env("TRAINBOOK_DIST_TIMEOUT", "120");
    cmd
}

/// Runs `args` under torchrun with two processes into `out`; returns stdout.
fn torchrun(data: &Path, out: &Path, args: &[String]) -> String {
    let mut cmd = torchrun_command(data, out, args, 0);
    let o = common::run_with_deadline(&mut cmd, Duration::from_secs(1200), "classify recipe");
    assert!(o.status.success(), "{}", common::text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Both lines, small: 48-pixel crops, batches of 16 per process, two epochs.
const SMALL: &[(&str, &str)] = &[
    ("--epochs", "2"),
    ("--batch-size", "16"),
    ("--train-crop-size", "48"),
    ("--val-resize-size", "56"),
    ("--val-crop-size", "48"),
];

#[test]
fn two_published_recipes_run_as_written_under_torchrun() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("classify");
    let data = stand_in(&work);

    // ResNet50 V2: warmup 1 of the 2 epochs, the EMA every 4 batches (16 per epoch).
    let small: Vec<(&str, &str)> =
        [SMALL, &[("--lr-warmup-epochs", "1"), ("--model-ema-steps", "4")]].concat();
    let args = made_small(RESNET50_V2, &small);
    let out = work.join("resnet50");
    let stdout = torchrun(&data, &out, &args);
    assert!(stdout.contains("Epoch: [1]  [12]"), "--print-freq 4: {stdout}");
    let records = read_records(&out.join("metrics.jsonl")).unwrap();
    let lrs: Vec<f64> = records.iter().map(|r| r.lr).collect();
    assert_eq!(lrs, torch_lrs(&args), "ResNet50 V2: the learning rate of each epoch");
    for r in &records {
        assert_eq!(r.world_size, 2);
        assert!(r.train_loss.is_finite() && r.val_loss.is_some_and(f64::is_finite), "{r:?}");
        assert!(r.ema_val_acc.is_some(), "--model-ema is validated: {r:?}");
    }
    assert!(out.join("model_ema.safetensors").is_file());

    // The same line with rank 1 SIGKILLed once epoch 0's checkpoint exists: torchrun restarts
    // the group, which continues from that checkpoint (the optimizer's state, the schedule,
    // the EMA and its count of updates, the random streams of the augmentations, MixUp/CutMix
    // and the repeated-augmentation sampler) and ends with the uninterrupted run's weights and
    // average, bit for bit: the same binary, arguments, world size and thread counts run the
    // same kernels in the same order.
    let killed = work.join("resnet50-killed");
    let mut cmd = torchrun_command(&data, &killed, &args, 1);
    let o = common::run_with_rank_1_killed(&mut cmd, &killed.join("checkpoints"), "classify");
    assert!(o.status.success(), "{}", common::text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("resuming from"), "{}", common::text(&o));
    for file in ["model.safetensors", "model_ema.safetensors"] {
        common::assert_same_weights(
            &out.join(file),
            &killed.join(file),
            &format!("ResNet50 V2 recipe after a killed worker vs uninterrupted: {file}"),
        );
    }

    // MobileNetV3-Large: RMSprop, StepLR every 2 epochs (so epoch 1 keeps the rate: use 1).
    let args = made_small(MOBILENET_V3_LARGE, &[SMALL, &[("--lr-step-size", "1")]].concat());
    let out = work.join("mobilenet");
    torchrun(&data, &out, &args);
    let records = read_records(&out.join("metrics.jsonl")).unwrap();
    let lrs: Vec<f64> = records.iter().map(|r| r.lr).collect();
    assert_eq!(lrs, torch_lrs(&args), "MobileNetV3-Large: the learning rate of each epoch");
    assert!(lrs[1] < lrs[0], "{lrs:?}");
    let loaded =
        oracle(&["load", "mobilenet_v3_large", "3", out.join("model.pth").to_str().unwrap()]);
    assert!(loaded.trim().parse::<usize>().unwrap() > 200, "{loaded}");

    // 64 training pictures: the RASampler would give each of the 2 processes none (it keeps
    // len // 256 * 256), which is an error naming the flag, not an empty run.
    let few = work.join("few");
    std::fs::create_dir_all(&few).unwrap();
    for split in ["train", "val"] {
        std::os::unix::fs::symlink(data.join("val"), few.join(split)).unwrap();
    }
    let args = made_small(RESNET50_V2, SMALL);
    let all: Vec<String> = args
        .into_iter()
        .chain(["--device", "cpu", "-j", "1", "--data-path"].map(String::from))
        .chain([few.display().to_string(), "--output-dir".into()])
        .chain([work.join("few-out").display().to_string()])
        .collect();
    let all: Vec<&str> = all.iter().map(|s| s.as_str()).collect();
    let mut cmd = trainbook::launch::torchrun(2, 0, &exe(), &all);
    let o = common::run_with_deadline(&mut cmd, Duration::from_secs(600), "classify, few pictures");
    assert!(!o.status.success());
    let text = common::text(&o);
    assert!(text.contains("--ra-sampler: 64 training pictures"), "{text}");
}

/// The ViT, EfficientNet V2 and RegNet recipes run as written, made small: 256 training
/// pictures (the fewest the RASampler keeps), two epochs of 48-pixel crops (a multiple of the
/// ViT's 16-pixel patches), batches of 16 per process, one warmup epoch; each epoch's learning
/// rate is torch's, the losses are finite, `--amp` on the CPU says it stays float32, and
/// torchvision's model of the same name (the ViT built for 48-pixel images) loads the
/// `model.pth` each run writes.
#[test]
fn the_vit_efficientnet_v2_and_regnet_recipes_run_as_written_made_small() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("classify-more");
    let data = stand_in_of(&work, 256);
    let small: &[(&str, &str)] = &[
        ("--epochs", "2"),
        ("--batch-size", "16"),
        ("--train-crop-size", "48"),
        ("--val-resize-size", "56"),
        ("--val-crop-size", "48"),
        ("--lr-warmup-epochs", "1"),
        ("--model-ema-steps", "4"),
    ];
    for (name, recipe) in [
        ("vit_b_16", VIT_B_16),
        ("efficientnet_v2_s", EFFICIENTNET_V2_S),
        ("regnet_x_400mf", REGNET_X_400MF),
    ] {
        let args = made_small(recipe, small);
        let out = work.join(name);
        let stdout = torchrun(&data, &out, &args);
        if args.iter().any(|a| a == "--amp") {
            assert!(stdout.contains("on the CPU the run stays float32"), "{name}: {stdout}");
        }
        let records = read_records(&out.join("metrics.jsonl")).unwrap();
        let lrs: Vec<f64> = records.iter().map(|r| r.lr).collect();
        assert_eq!(lrs, torch_lrs(&args), "{name}: the learning rate of each epoch");
        for r in &records {
            assert!(r.train_loss.is_finite() && r.val_loss.is_some_and(f64::is_finite), "{r:?}");
        }
        let model = out.join("model.pth");
        let size = if name.starts_with("vit") { "48" } else { "" };
        let mut load = vec!["load", name, "3", model.to_str().unwrap()];
        load.extend((!size.is_empty()).then_some(size));
        let loaded = oracle(&load);
        assert!(loaded.trim().parse::<usize>().unwrap() > 10, "{name}: {loaded}");
    }
}

#[test]
fn the_books_flag_table_is_the_programs_and_refused_flags_are_named() {
    let _turn = common::module_turn(module_path!());
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/src/torchvision-recipe.md"
    ))
    .unwrap();
    let help = Command::new(exe()).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let rows: Vec<&str> = page.lines().filter(|l| l.starts_with("| `")).collect();
    let mut counts = [0usize; 3];
    for row in &rows {
        let cells: Vec<&str> = row.split(" | ").collect();
        for flag in cells[0].split('`').skip(1).step_by(2) {
            assert!(help.contains(flag), "the table's {flag} is not in classify --help");
        }
        let here = cells[1];
        let kind = ["supported", "in part", "not"].iter().position(|k| here.starts_with(k));
        counts[kind.unwrap_or_else(|| panic!("row without a verdict: {row}"))] += 1;
    }
    assert_eq!(rows.len(), 51, "the reference has 51 flags");
    let summary = format!(
        "**{} supported as torchvision has them, {} in part, {} not**",
        counts[0], counts[1], counts[2]
    );
    assert!(page.replace('\n', " ").contains(&summary), "the page must say {summary}");

    for (bad, named) in [
        (&["--start-epoch", "3"][..], "--start-epoch"),
        (&["--auto-augment", "augmix", "--augmix-severity", "11"], "severity"),
        (&["--auto-augment", "cifar10"], "--auto-augment cifar10"),
        (&["--backend", "tensor"], "--backend"),
        (&["--dist-url", "tcp://head:23456"], "--dist-url"),
    ] {
        let o = Command::new(exe()).args(bad).args(["--device", "cpu"]).output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{bad:?}: {}", common::text(&o));
        assert!(String::from_utf8_lossy(&o.stderr).contains(named), "{}", common::text(&o));
    }
}
