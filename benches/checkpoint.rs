//! Checkpoint save/load time for ResNet34 (3 classes) + Adam state, trainbook (atomic,
//! fsynced, CRC32-checked) vs torch.save (+ os.sync) / torch.load, in the same run, same disk.
//! Best of 3 on both sides. Also the stall of a background save (`Checkpointer::background`):
//! how long the training step waits while the state is copied to host memory, against
//! torch.save+sync's time (goal: at most 0.25x).
//!
//!     cargo bench --bench checkpoint
use std::process::Command;
use std::time::Instant;

use tch::nn::{ModuleT, VarStore};
use tch::{Device, Kind, Tensor};
use trainbook::checkpoint::{Checkpointer, Policy, TrainState};
use trainbook::dist::Dist;
use trainbook::models::{resnet34, HeadKind};
use trainbook::train::Optimizer;

fn main() -> anyhow::Result<()> {
    let root = env!("CARGO_MANIFEST_DIR");
    let dir = std::path::PathBuf::from(format!("{root}/target/bench/checkpoint-io"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let mut vs = VarStore::new(Device::Cpu);
    let net = resnet34(&vs.root(), 3, HeadKind::Linear);
    let mut opt = Optimizer::adam(&vs, 1e-4);
    net.forward_t(&Tensor::randn([2, 3, 64, 64], (Kind::Float, Device::Cpu)), true)
        .sum(Kind::Float)
        .backward();
    opt.step().unwrap();
    let dist = Dist::single(Device::Cpu);
    let mut ckpt = Checkpointer::new(
        dir.join("ckpts"),
        Policy { every_epochs: None, every_steps: Some(1), keep_last: 1, best: None },
    );
    let (mut saves, mut loads) = (Vec::new(), Vec::new());
    for e in 0..3 {
        let state = || Ok(TrainState::new(&vs, &opt, e));
        let t = Instant::now();
        ckpt.after_step(&dist, state)?;
        saves.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let latest = ckpt.latest(&dist)?.expect("just written");
        ckpt.restore(&latest, &dist, &mut vs, &mut opt)?;
        loads.push(t.elapsed().as_secs_f64());
    }
    let best = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    let (save, load) = (best(&saves), best(&loads));
    // Background saves: the time after_step blocks (the snapshot), then the write's own time.
    let mut bg = Checkpointer::new(
        dir.join("bg"),
        Policy { every_epochs: None, every_steps: Some(1), keep_last: 1, best: None },
    )
    .background(true);
    let (mut stalls, mut writes) = (Vec::new(), Vec::new());
    for e in 0..3 {
        let state = || Ok(TrainState::new(&vs, &opt, e));
        let t = Instant::now();
        bg.after_step(&dist, state)?;
        stalls.push(t.elapsed().as_secs_f64());
        bg.wait()?;
        writes.push(t.elapsed().as_secs_f64());
    }
    let (stall, bg_total) = (best(&stalls), best(&writes));
    let venv = std::env::var("TRAINBOOK_VENV").unwrap_or_else(|_| format!("{root}/.venv"));
    let out = Command::new(format!("{venv}/bin/python"))
        .arg(format!("{root}/benches/pytorch_checkpoint.py"))
        .arg(&dir)
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "PyTorch side failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let torch: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let (tsave, tload) = (
        torch["save_s"].as_f64().unwrap_or(f64::NAN),
        torch["load_s"].as_f64().unwrap_or(f64::NAN),
    );
    println!(
        "ResNet34 + Adam checkpoint ({:.0} MB in torch.save's file)",
        torch["bytes"].as_f64().unwrap_or(0.0) / 1e6
    );
    println!("save: trainbook {:.0} ms (atomic, fsync, CRC32), torch.save+sync {:.0} ms, time ratio {:.2}x", save * 1e3, tsave * 1e3, save / tsave);
    println!("background save: the step waits {:.0} ms ({:.2}x torch.save+sync), the write completes after {:.0} ms", stall * 1e3, stall / tsave, bg_total * 1e3);
    println!("load: trainbook {:.0} ms (CRC32-checked, restored into model+optimizer), torch.load {:.0} ms, time ratio {:.2}x", load * 1e3, tload * 1e3, load / tload);
    let report = serde_json::json!({"save": {"trainbook_s": save, "torch_s": tsave, "time_ratio": save / tsave}, "load": {"trainbook_s": load, "torch_s": tload, "time_ratio": load / tload}, "background_save": {"stall_s": stall, "write_s": bg_total, "stall_vs_torch_save": stall / tsave}});
    std::fs::write(
        format!("{root}/target/bench/checkpoint.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
