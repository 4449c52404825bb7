//! Data-parallel training speed, trainbook vs PyTorch DDP (Gloo) in the same run: ResNet34,
//! 3 classes, global batch 16 split over the ranks, 224px, Adam 1e-4, label smoothing 0.1;
//! 2 ranks x 1 thread under torchrun, the same with 2 accumulated micro-batches of 4 per step,
//! 1 rank x 2 threads for the world-size comparison, and 1 rank x 1 thread at the per-rank
//! batch of 8 to show what the gradient exchange still adds to a step after the overlap.
//!
//!     cargo bench --bench ddp
//!
//! Under torchrun this same binary is the rank (it sees RANK). Writes target/bench/ddp.json.
use std::process::Command;
use std::time::Instant;

use tch::nn::{ModuleT, VarStore};
use tch::{Device, Kind, Tensor};
use trainbook::dist::Dist;
use trainbook::models::{resnet34, HeadKind};
use trainbook::train::Ddp;
use trainbook::train::{CrossEntropyLoss, Optimizer};

const STEPS: usize = 6;

fn rank_main() -> anyhow::Result<()> {
    let dist = Dist::init()?;
    let world = dist.world_size();
    tch::set_num_threads(
        std::env::var("TB_THREADS").ok().and_then(|v| v.parse().ok()).unwrap_or(1),
    );
    tch::manual_seed(0);
    let vs = VarStore::new(Device::Cpu);
    let net = resnet34(&vs.root(), 3, HeadKind::Linear);
    let ddp = Ddp::wrap(&vs, &dist)?;
    let mut opt = Optimizer::adam(&vs, 1e-4);
    let accumulate: i64 =
        std::env::var("TB_ACCUMULATE").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let micro = 16 / world as i64 / accumulate;
    let x = Tensor::randn([micro, 3, 224, 224], (Kind::Float, Device::Cpu));
    let y = Tensor::randint(3, [micro], (Kind::Int64, Device::Cpu));
    let loss_fn = CrossEntropyLoss::new().label_smoothing(0.1);
    let mut step = || -> anyhow::Result<()> {
        opt.zero_grad();
        for i in 0..accumulate {
            let micro_step = || -> trainbook::Result<()> {
                ddp.before_forward()?;
                let loss = loss_fn.mean(&net.forward_t(&x, true), &y) / accumulate as f64;
                ddp.backward(&loss)
            };
            if i + 1 < accumulate {
                ddp.no_sync(micro_step)?
            } else {
                micro_step()?
            }
        }
        opt.step()?;
        Ok(())
    };
    for _ in 0..2 {
        step()?;
    }
    dist.barrier()?;
    let start = Instant::now();
    for _ in 0..STEPS {
        step()?;
    }
    dist.barrier()?;
    let rate = (16 * STEPS) as f64 / start.elapsed().as_secs_f64();
    dist.println(
        serde_json::json!({"world": world, "threads": tch::get_num_threads(), "img_per_s": rate}),
    );
    dist.destroy()?;
    Ok(())
}

fn last_json(out: &std::process::Output) -> anyhow::Result<serde_json::Value> {
    let text = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(
        out.status.success(),
        "run failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .ok_or_else(|| anyhow::anyhow!("no result in:\n{text}"))?;
    Ok(serde_json::from_str(line)?)
}

fn main() -> anyhow::Result<()> {
    if std::env::var_os("RANK").is_some() {
        return rank_main();
    }
    let root = env!("CARGO_MANIFEST_DIR");
    let venv = std::env::var("TRAINBOOK_VENV").unwrap_or_else(|_| format!("{root}/.venv"));
    let torchrun = format!("{venv}/bin/torchrun");
    let me = std::env::current_exe()?;
    // n ranks x `threads` threads, `accumulate` micro-batches per step, global batch `batch`.
    let run = |n: usize, threads: usize, accumulate: usize, python: bool| -> anyhow::Result<f64> {
        let mut cmd = Command::new(&torchrun);
        cmd.args(["--standalone", &format!("--nproc-per-node={n}")])
            .env("OMP_NUM_THREADS", threads.to_string())
            .env("TB_THREADS", threads.to_string())
            .env("TB_ACCUMULATE", accumulate.to_string());
        if python {
            cmd.arg(format!("{root}/benches/pytorch_ddp.py"));
        } else {
            cmd.arg("--no-python").arg(&me);
        }
        Ok(last_json(&cmd.output()?)?["img_per_s"].as_f64().unwrap_or(f64::NAN))
    };
    let (tb2, pt2) = (run(2, 1, 1, false)?, run(2, 1, 1, true)?);
    let (tba, pta) = (run(2, 1, 2, false)?, run(2, 1, 2, true)?);
    let (tb1, pt1) = (run(1, 2, 1, false)?, run(1, 2, 1, true)?);
    // One rank x 1 thread with 2 micro-batches of 8: the same per-rank work as a step at world 2,
    // without any exchange.
    let (tb1a, pt1a) = (run(1, 1, 2, false)?, run(1, 1, 2, true)?);
    println!(
        "ResNet34, global batch 16, 224px, Adam, Gloo ({} cores)",
        std::thread::available_parallelism()?.get()
    );
    println!(
        "2 ranks x 1 thread: trainbook {tb2:.2} img/s, pytorch DDP {pt2:.2} img/s, ratio {:.2}x",
        tb2 / pt2
    );
    println!("2 ranks x 1 thread, accumulate 2: trainbook {tba:.2} img/s, pytorch DDP {pta:.2} img/s, ratio {:.2}x", tba / pta);
    println!(
        "1 rank x 2 threads: trainbook {tb1:.2} img/s, pytorch {pt1:.2} img/s, ratio {:.2}x",
        tb1 / pt1
    );
    println!("world 2 vs world 1: trainbook {:.2}x, pytorch {:.2}x", tb2 / tb1, pt2 / pt1);
    // A step at world 2 (16 images over 2 ranks: 8 per rank) vs the time one rank alone needs
    // for 8 images (half of its 2-micro-batch step of 16).
    let (tb_step2, tb_step1) = (16.0 / tb2, 8.0 / tb1a);
    let (pt_step2, pt_step1) = (16.0 / pt2, 8.0 / pt1a);
    println!(
        "exchange cost after overlap (step at world 2 / same per-rank work alone - 1): trainbook {:+.1}%, pytorch {:+.1}%",
        (tb_step2 / tb_step1 - 1.0) * 100.0,
        (pt_step2 / pt_step1 - 1.0) * 100.0
    );
    let report = serde_json::json!({
        "world2": {"trainbook": tb2, "pytorch": pt2, "ratio": tb2 / pt2},
        "world2_accumulate2": {"trainbook": tba, "pytorch": pta, "ratio": tba / pta},
        "world1": {"trainbook": tb1, "pytorch": pt1, "ratio": tb1 / pt1},
        "exchange_overhead": {"trainbook": tb_step2 / tb_step1 - 1.0, "pytorch": pt_step2 / pt_step1 - 1.0},
    });
    std::fs::create_dir_all(format!("{root}/target/bench"))?;
    std::fs::write(
        format!("{root}/target/bench/ddp.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    Ok(())
}
