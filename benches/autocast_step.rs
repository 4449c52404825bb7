//! The ResNet34 train step by phase, trainbook against PyTorch, rounds interleaved so that
//! both sides meet the same machine state: `zero_grad` (both set the gradients to `None`, so
//! that backward allocates them again), forward
//! and loss under bf16 autocast (trainbook's `Precision::Bf16` region,
//! `torch.autocast("cpu", dtype=torch.bfloat16)`), backward, and the fused Adam step; batch 16, 224px, label smoothing 0.1, one fixed batch, libtorch's default
//! threads on both sides. Each round times 10 steps after 2 warm-up steps on each side; the
//! figures are the medians over all rounds' per-step medians. `f32` as the first argument
//! times float32 instead.
//!
//!     cargo bench --bench autocast_step [-- f32]
//!
//! Writes target/bench/autocast_step.json (with whether the CPU has bf16 units: without them
//! both sides run slow bf16 fallbacks).
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use tch::nn::{ModuleT, VarStore};
use tch::{Device, Kind, Tensor};
use trainbook::models::{resnet34, HeadKind};
use trainbook::train::{CrossEntropyLoss, Optimizer, Precision};

const ROUNDS: usize = 4;
const STEPS: usize = 10;
const PHASES: [&str; 5] = ["zero_grad", "forward", "backward", "optimizer", "step"];

/// The middle value (the upper one of an even count).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> anyhow::Result<()> {
    let root = env!("CARGO_MANIFEST_DIR");
    let python =
        PathBuf::from(std::env::var("TRAINBOOK_VENV").unwrap_or_else(|_| format!("{root}/.venv")))
            .join("bin/python");
    let f32_only = std::env::args().any(|a| a == "f32");
    let precision = if f32_only { Precision::F32 } else { Precision::Bf16 };
    tch::manual_seed(0);
    let vs = VarStore::new(Device::Cpu);
    let net = resnet34(&vs.root(), 3, HeadKind::Linear);
    let mut opt = Optimizer::adam(&vs, 1e-4);
    let loss_fn = CrossEntropyLoss::new().label_smoothing(0.1);
    let x = Tensor::randn([16, 3, 224, 224], (Kind::Float, Device::Cpu));
    let y = Tensor::randint(3, [16], (Kind::Int64, Device::Cpu));
    // Per round, the median of each phase: [trainbook, pytorch][phase][round].
    let mut rounds = [[(); 5].map(|_| Vec::new()), [(); 5].map(|_| Vec::new())];
    for round in 0..ROUNDS {
        let mut times = [(); 5].map(|_| Vec::new());
        for i in 0..2 + STEPS {
            let t0 = Instant::now();
            opt.zero_grad();
            let z = Instant::now();
            let loss = precision.run(Device::Cpu, || loss_fn.mean(&net.forward_t(&x, true), &y))?;
            let t1 = Instant::now();
            loss.backward();
            let t2 = Instant::now();
            opt.step()?;
            let t3 = Instant::now();
            if i >= 2 {
                let spans = [z - t0, t1 - z, t2 - t1, t3 - t2, t3 - t0];
                for (k, s) in spans.iter().enumerate() {
                    times[k].push(s.as_secs_f64());
                }
            }
        }
        for (k, t) in times.into_iter().enumerate() {
            rounds[0][k].push(median(t));
        }
        let out = Command::new(&python)
            .arg(format!("{root}/benches/pytorch_autocast_step.py"))
            .arg(STEPS.to_string())
            .arg(if f32_only { "f32" } else { "bf16" })
            .output()?;
        anyhow::ensure!(
            out.status.success(),
            "PyTorch side failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let torch: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        for (k, phase) in PHASES.iter().enumerate() {
            rounds[1][k].push(torch[phase].as_f64().unwrap_or(f64::NAN));
        }
        println!(
            "round {}: step trainbook {:.4} s, pytorch {:.4} s",
            round + 1,
            rounds[0][4][round],
            rounds[1][4][round]
        );
    }
    let [ours, theirs] = rounds.map(|sides| sides.map(median));
    let bf16_units =
        std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|c| c.contains("avx512_bf16"));
    println!("{precision} ResNet34 step by phase (median s; ratio = pytorch / trainbook, above 1: trainbook faster); CPU bf16 units: {bf16_units}");
    let mut report = serde_json::Map::new();
    for (k, phase) in PHASES.iter().enumerate() {
        println!(
            "  {phase:<9} trainbook {:.4}  pytorch {:.4}  ratio {:.3}",
            ours[k],
            theirs[k],
            theirs[k] / ours[k]
        );
        report.insert(
            phase.to_string(),
            serde_json::json!({"trainbook_s": ours[k], "pytorch_s": theirs[k], "speed_ratio": theirs[k] / ours[k]}),
        );
    }
    report.insert("precision".into(), precision.to_string().into());
    report.insert("cpu_bf16_units".into(), bf16_units.into());
    report.insert("threads".into(), tch::get_num_threads().into());
    std::fs::create_dir_all(format!("{root}/target/bench"))?;
    std::fs::write(
        format!("{root}/target/bench/autocast_step.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    Ok(())
}
