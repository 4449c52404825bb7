//! The GPU benchmark: trainbook against PyTorch on the same GPU in the same run
//! (benches/pytorch_gpu.py is PyTorch's side; its header describes each measurement):
//! 1. the ResNet34 course model's train step (Adam 1e-4, label smoothing 0.1, 224 px), batch
//!    16 (the course's) and 64, in float32 and in bf16 autocast + channels_last: img/s and peak
//!    GPU memory (`trainbook::cuda::max_memory` against `torch.cuda.max_memory_*`). trainbook's
//!    side is the step as `train_epoch` runs it (`Precision::run`, the fused Adam, the metrics
//!    kept on the GPU and read once per 4 steps) over 4 batches kept on the GPU, without a
//!    loader: eager, with forward, loss and backward replayed as a CUDA graph (`StepGraph`),
//!    and graphed with cuDNN's benchmark; PyTorch's eager, eager with cudnn.benchmark, the
//!    whole step under torch.cuda.graph with a capturable Adam, and (batch 16, float32)
//!    torch.compile(mode="reduce-overhead");
//! 2. the DesignSafe training epoch on the GPU (the stand-in's JPEGs, AutoAugment + Resize
//!    244, batch 16, float32): img/s and the share of the epoch spent waiting for data, with
//!    4, 8 and 16 loader workers on both sides (trainbook's loader delivers pinned,
//!    non-blocking batches to the GPU; PyTorch's DataLoader with pin_memory);
//! 3. the same loader alone, no GPU work: img/s with 4, 8 and 16 workers.
//!
//!     cargo bench --features cuda --bench gpu [-- --out DIR --data DIR --scripts DIR]
//!
//! Writes OUT/gpu.json (default target/bench/). Without a CUDA GPU it prints SKIPPED and
//! writes `{"skipped": reason}`. `--quick` measures fewer steps and one worker count (for the
//! bundle's own check).
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use serde_json::{json, Value};
use tch::nn::{ModuleT, VarStore};
use tch::{Device, Kind, Tensor};
use trainbook::compose;
use trainbook::cuda::{empty_cache, max_memory, reset_peak_memory_stats};
use trainbook::data::{DataLoader, Dataset, ImageFolder, Subset};
use trainbook::models::{channels_last, resnet34_classifier, to_channels_last};
use trainbook::train::{
    set_cudnn_benchmark, train_epoch, CrossEntropyLoss, DeviceMetrics, EpochOptions, Optimizer,
    Precision, RunningMetrics, StepGraph,
};
use trainbook::transforms::{AutoAugment, Resize, ToTensor};

#[derive(Parser, Debug)]
struct Args {
    /// Folder of gpu.json.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/target/bench"))]
    out: PathBuf,
    /// DesignSafe-layout data (Train/); the stand-in is generated there if missing.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/data/designsafe/Dataset_2"))]
    data: PathBuf,
    /// Where pytorch_gpu.py is.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/benches"))]
    scripts: PathBuf,
    /// Fewer steps, one worker count.
    #[arg(long)]
    quick: bool,
    /// Only the DesignSafe epoch and the loader (no train-step rows).
    #[arg(long)]
    epochs_only: bool,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

/// Runs pytorch_gpu.py with `args` and parses its JSON line.
fn pytorch(args: &Args, cmd: &[&str]) -> anyhow::Result<Value> {
    pytorch_within(args, cmd, None)?.context("no time limit, no timeout")
}

/// [`pytorch`] killed after `limit` (`Ok(None)` then): for torch.compile, whose compilation
/// time is not known in advance.
fn pytorch_within(
    args: &Args,
    cmd: &[&str],
    limit: Option<std::time::Duration>,
) -> anyhow::Result<Option<Value>> {
    let python = trainbook::programs::python();
    let scratch = tempfile::tempdir()?;
    let (out_path, err_path) = (scratch.path().join("out"), scratch.path().join("err"));
    let mut child = Command::new(&python)
        .arg(args.scripts.join("pytorch_gpu.py"))
        .args(cmd)
        .stdout(std::fs::File::create(&out_path)?)
        .stderr(std::fs::File::create(&err_path)?)
        .spawn()
        .with_context(|| format!("starting {}", python.display()))?;
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if limit.is_some_and(|l| start.elapsed() > l) {
            child.kill()?;
            child.wait()?;
            return Ok(None);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let (stdout, stderr) =
        (std::fs::read_to_string(&out_path)?, std::fs::read_to_string(&err_path)?);
    anyhow::ensure!(status.success(), "pytorch_gpu.py {cmd:?} failed: {stderr}");
    let value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .with_context(|| format!("pytorch_gpu.py {cmd:?} printed {stdout}"))?;
    Ok(Some(value))
}

fn course_model(device: Device, cl: bool) -> (VarStore, impl ModuleT) {
    tch::manual_seed(0);
    let vs = VarStore::new(device);
    let net = resnet34_classifier(&vs.root(), 3);
    if cl {
        to_channels_last(&vs);
    }
    (vs, net)
}

/// How trainbook's step runs in [`trainbook_step`].
#[derive(Clone, Copy, Debug, PartialEq)]
enum StepMode {
    /// As `train_epoch` runs it eagerly.
    Eager,
    /// Forward, loss and backward replayed as a CUDA graph (`StepGraph`), the fused Adam after.
    Graphed,
    /// Graphed, with cuDNN's benchmark on (`trainbook::train::set_cudnn_benchmark`).
    GraphedBenchmark,
}

/// trainbook's train step: img/s over `steps` steps after 4 warm-up steps (with a graph: 3
/// eager steps and the capture), and the peak allocated and reserved bytes over the timed steps.
fn trainbook_step(
    device: Device,
    batch: i64,
    steps: usize,
    bf16: bool,
    mode: StepMode,
) -> anyhow::Result<Value> {
    // PyTorch's side runs each configuration in a new process: start from an empty cache too,
    // or the reserved peak carries the previous configuration's blocks (it did: bf16 reserved
    // float32's 3.3 and 12.9 GiB on an H100, against PyTorch's 1.8 and 5.6).
    empty_cache(device)?;
    set_cudnn_benchmark(mode == StepMode::GraphedBenchmark)?;
    let (vs, net) = course_model(device, bf16);
    let mut opt = Optimizer::adam(&vs, 1e-4);
    let loss_fn = CrossEntropyLoss::new().label_smoothing(0.1);
    let precision = if bf16 { Precision::Bf16 } else { Precision::F32 };
    let xs: Vec<Tensor> = (0..4)
        .map(|_| {
            let x = Tensor::randn([batch, 3, 224, 224], (Kind::Float, device));
            if bf16 {
                channels_last(&x)
            } else {
                x
            }
        })
        .collect();
    let ys: Vec<Tensor> =
        (0..4).map(|_| Tensor::randint(3, [batch], (Kind::Int64, device))).collect();
    let mut graph = StepGraph::new();
    let mut run = |n: usize| -> anyhow::Result<()> {
        let mut metrics = DeviceMetrics::new(device, RunningMetrics::default());
        for i in 0..n {
            let (x, y) = (&xs[i % 4], &ys[i % 4]);
            let mut fwd_bwd = |x: &Tensor, y: &Tensor| {
                let (logits, loss) = precision.run(device, || {
                    let logits = net.forward_t(x, true);
                    let loss = loss_fn.mean(&logits, y);
                    (logits, loss)
                })?;
                loss.backward();
                Ok((logits, loss))
            };
            let (logits, loss) = if mode == StepMode::Eager {
                opt.zero_grad();
                fwd_bwd(x, y)?
            } else {
                graph.step(device, (x, y), &mut opt, &mut fwd_bwd)?
            };
            opt.step()?;
            metrics.add_mean_loss(&loss, &logits, y);
            if i % 4 == 3 {
                metrics.read();
            }
        }
        Ok(())
    };
    run(4)?;
    tch::Cuda::synchronize(0);
    reset_peak_memory_stats(device)?;
    let start = Instant::now();
    run(steps)?;
    tch::Cuda::synchronize(0);
    let seconds = start.elapsed().as_secs_f64();
    let (allocated, reserved) = max_memory(device)?;
    set_cudnn_benchmark(false)?;
    if mode != StepMode::Eager {
        anyhow::ensure!(
            graph.is_captured() && graph.replays() as usize == steps + 1,
            "the graphed step did not replay every timed step (replays {}, eager: {:?})",
            graph.replays(),
            graph.eager_reason()
        );
    }
    Ok(json!({
        "img_per_s": (batch as usize * steps) as f64 / seconds,
        "peak_allocated_bytes": allocated,
        "peak_reserved_bytes": reserved,
    }))
}

fn course_folder(data: &Path) -> anyhow::Result<ImageFolder> {
    Ok(ImageFolder::new(data.join("Train"))?.with_transform(compose![
        AutoAugment::imagenet(),
        Resize::new((244, 244)),
        ToTensor
    ]))
}

/// trainbook's DesignSafe epoch on the GPU with `workers` loader threads, after a warm-up of
/// 8 batches; with the seconds it waited for data and the first-batch latency of a fresh
/// loader (how much of the wait is the loader's start).
fn trainbook_epoch(
    device: Device,
    data: &Path,
    workers: usize,
    graphed: bool,
) -> anyhow::Result<Value> {
    let (vs, net) = course_model(device, false);
    let mut opt = Optimizer::adam(&vs, 1e-4);
    let loss_fn = CrossEntropyLoss::new().label_smoothing(0.1);
    let graph = std::cell::RefCell::new(StepGraph::new());
    let opts = EpochOptions::on(device).quiet();
    let opts = if graphed { opts.cuda_graph(&graph) } else { opts };
    let folder = Arc::new(course_folder(data)?);
    let warm = Subset::new(folder.clone(), 0..128.min(folder.len()))?;
    let mut warm = DataLoader::new(warm, 16).shuffle(true).num_workers(workers).device(device);
    train_epoch(&net, &mut warm, &mut opt, &loss_fn, &opts)?;
    let loader = || {
        anyhow::Ok(
            DataLoader::new(course_folder(data)?, 16)
                .shuffle(true)
                .num_workers(workers)
                .device(device),
        )
    };
    // How much of the epoch's wait is the loader's start (its workers' first decodes): a fresh
    // loader's first batch, timed alone (the epoch below starts a fresh loader too).
    let start = Instant::now();
    loader()?.iter().next().transpose()?;
    let first_batch_s = start.elapsed().as_secs_f64();
    let epoch = train_epoch(&net, &mut loader()?, &mut opt, &loss_fn, &opts)?;
    let waited: f64 = epoch.data_wait_s.iter().sum();
    Ok(json!({
        "img_per_s": epoch.img_per_s,
        "data_wait_share": waited / epoch.seconds,
        "data_wait_s": waited,
        "first_batch_s": first_batch_s,
        "seconds": epoch.seconds,
        "images": epoch.samples,
    }))
}

/// trainbook's loader alone (no GPU work): img/s over one pass.
fn trainbook_loader(data: &Path, workers: usize) -> anyhow::Result<Value> {
    let mut loader = DataLoader::new(course_folder(data)?, 16).shuffle(true).num_workers(workers);
    let (start, mut seen) = (Instant::now(), 0);
    for batch in loader.iter() {
        seen += batch?.len();
    }
    Ok(json!({"img_per_s": seen as f64 / start.elapsed().as_secs_f64(), "images": seen}))
}

fn ratio(ours: &Value, theirs: &Value, key: &str) -> f64 {
    ours[key].as_f64().unwrap_or(f64::NAN) / theirs[key].as_f64().unwrap_or(f64::NAN)
}

fn write(out: &Path, report: &Value) -> anyhow::Result<()> {
    std::fs::create_dir_all(out).with_context(|| out.display().to_string())?;
    let path = out.join("gpu.json");
    std::fs::write(&path, serde_json::to_string_pretty(report)?)
        .with_context(|| path.display().to_string())?;
    println!("wrote {}", path.display());
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if !tch::Cuda::is_available() {
        let reason = "no CUDA GPU on this machine (libtorch sees none)";
        println!("SKIPPED gpu bench: {reason}");
        return write(&args.out, &json!({ "skipped": reason }));
    }
    let device = Device::Cuda(0);
    let info = pytorch(&args, &["info"])?;
    println!("GPU: {info}");
    let mut report = json!({ "machine": info, "trainbook": trainbook::versions().to_string() });

    let (steps, batches, workers): (usize, &[i64], &[usize]) =
        if args.quick { (8, &[16], &[16]) } else { (24, &[16, 64], &[4, 8, 16]) };
    let img_s = |v: &Value| v["img_per_s"].as_f64().unwrap_or(f64::NAN);
    let mut step_rows = Vec::new();
    for &batch in if args.epochs_only { &[][..] } else { batches } {
        for bf16 in [false, true] {
            let name = if bf16 { "bf16 autocast + channels_last" } else { "float32" };
            let ours = trainbook_step(device, batch, steps, bf16, StepMode::Eager)?;
            // A graph that fails is reported in its row; the other measurements go on.
            let failed = |e: anyhow::Error| json!({ "error": format!("{e:#}") });
            let graphed = trainbook_step(device, batch, steps, bf16, StepMode::Graphed)
                .unwrap_or_else(failed);
            let graphed_bench =
                trainbook_step(device, batch, steps, bf16, StepMode::GraphedBenchmark)
                    .unwrap_or_else(failed);
            let _ = set_cudnn_benchmark(false);
            let (b, s) = (batch.to_string(), steps.to_string());
            let torch_mode = |mode: &'static str| {
                let mut cmd = vec!["step", &b, &s, if bf16 { "bf16" } else { "f32" }, mode];
                if bf16 {
                    cmd.push("channels_last");
                }
                cmd
            };
            let theirs = pytorch(&args, &torch_mode("eager"))?;
            let theirs_bench = pytorch(&args, &torch_mode("benchmark"))?;
            let theirs_graph = pytorch(&args, &torch_mode("graph"))?;
            // torch.compile: batch 16 in float32 (the course's setting) only, within 150 s.
            let theirs_compile = if batch == 16 && !bf16 && !args.quick {
                let limit = std::time::Duration::from_secs(150);
                pytorch_within(&args, &torch_mode("compile"), Some(limit))
                    .unwrap_or_else(|e| Some(json!({ "error": format!("{e:#}") })))
                    .unwrap_or_else(|| json!({ "error": "not measured: more than 150 s" }))
            } else {
                json!({ "skipped": "measured at batch 16 in float32 only" })
            };
            let (speed, memory) =
                (ratio(&ours, &theirs, "img_per_s"), ratio(&ours, &theirs, "peak_allocated_bytes"));
            let graphed_vs_eager = ratio(&graphed, &theirs, "img_per_s");
            let best_torch = [&theirs, &theirs_bench, &theirs_graph, &theirs_compile]
                .iter()
                .map(|v| img_s(v))
                .filter(|x| x.is_finite())
                .fold(0.0, f64::max);
            let best_ours = img_s(&graphed).max(img_s(&graphed_bench));
            println!(
                "ResNet34 step, batch {batch}, {name}: trainbook eager {:.0}, graphed {:.0}, graphed + \
                 cudnn.benchmark {:.0} img/s; PyTorch eager {:.0}, cudnn.benchmark {:.0}, \
                 torch.cuda.graph {:.0}, torch.compile {} img/s; eager {speed:.2}x, graphed vs \
                 PyTorch eager {graphed_vs_eager:.2}x, best vs best {:.2}x; peak allocated \
                 {:.2} vs {:.2} GiB, {memory:.3}x",
                img_s(&ours),
                img_s(&graphed),
                img_s(&graphed_bench),
                img_s(&theirs),
                img_s(&theirs_bench),
                img_s(&theirs_graph),
                theirs_compile["img_per_s"]
                    .as_f64()
                    .map_or_else(|| theirs_compile.to_string(), |x| format!("{x:.0}")),
                best_ours / best_torch,
                ours["peak_allocated_bytes"].as_f64().unwrap_or(0.0) / f64::from(1 << 30),
                theirs["peak_allocated_bytes"].as_f64().unwrap_or(0.0) / f64::from(1 << 30),
            );
            step_rows.push(json!({
                "batch": batch, "precision": name, "trainbook": ours, "pytorch": theirs,
                "speed_ratio": speed, "peak_memory_ratio": memory,
                "trainbook_graphed": graphed, "trainbook_graphed_cudnn_benchmark": graphed_bench,
                "pytorch_cudnn_benchmark": theirs_bench, "pytorch_cuda_graph": theirs_graph,
                "pytorch_compile_reduce_overhead": theirs_compile,
                "graphed_vs_pytorch_eager": graphed_vs_eager,
                "best_vs_best": best_ours / best_torch,
            }));
        }
    }
    report["resnet34_step"] = step_rows.into();

    trainbook::data::ensure_designsafe(&args.data, false)?;
    let data = args.data.to_string_lossy().to_string();
    let (mut epoch_rows, mut loader_rows) = (Vec::new(), Vec::new());
    for &w in workers {
        let ours = trainbook_epoch(device, &args.data, w, false)?;
        let graphed = trainbook_epoch(device, &args.data, w, true)?;
        let theirs = pytorch(&args, &["epoch", &data, &w.to_string()])?;
        let speed = ratio(&ours, &theirs, "img_per_s");
        println!(
            "DesignSafe epoch, {w} workers: trainbook {:.0} img/s (data wait {:.0}%: {:.2} s, of \
             which a fresh loader's first batch takes {:.2} s), PyTorch {:.0} img/s (data wait \
             {:.0}%), {speed:.2}x",
            ours["img_per_s"].as_f64().unwrap_or(0.0),
            100.0 * ours["data_wait_share"].as_f64().unwrap_or(0.0),
            ours["data_wait_s"].as_f64().unwrap_or(0.0),
            ours["first_batch_s"].as_f64().unwrap_or(0.0),
            theirs["img_per_s"].as_f64().unwrap_or(0.0),
            100.0 * theirs["data_wait_share"].as_f64().unwrap_or(0.0),
        );
        let graphed_speed = ratio(&graphed, &theirs, "img_per_s");
        println!(
            "DesignSafe epoch, {w} workers, the step as a CUDA graph: trainbook {:.0} img/s (data \
             wait {:.0}%), {graphed_speed:.2}x PyTorch's",
            graphed["img_per_s"].as_f64().unwrap_or(0.0),
            100.0 * graphed["data_wait_share"].as_f64().unwrap_or(0.0),
        );
        epoch_rows.push(json!({
            "workers": w, "trainbook": ours, "pytorch": theirs, "speed_ratio": speed,
            "trainbook_graphed": graphed, "graphed_speed_ratio": graphed_speed,
        }));
        let ours = trainbook_loader(&args.data, w)?;
        let theirs = pytorch(&args, &["loader", &data, &w.to_string()])?;
        let speed = ratio(&ours, &theirs, "img_per_s");
        println!(
            "JPEG loader alone, {w} workers: trainbook {:.0} img/s, torchvision {:.0} img/s, {speed:.2}x",
            ours["img_per_s"].as_f64().unwrap_or(0.0),
            theirs["img_per_s"].as_f64().unwrap_or(0.0),
        );
        loader_rows.push(
            json!({"workers": w, "trainbook": ours, "pytorch": theirs, "speed_ratio": speed}),
        );
    }
    report["designsafe_epoch"] = epoch_rows.into();
    report["loader"] = loader_rows.into();
    report["host_reads"] = trainbook::train::host_reads().into();
    write(&args.out, &report)?;
    Ok(())
}
