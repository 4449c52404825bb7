//! c10d-check: joins the process group its launcher describes (torchrun, srun, mpirun, the Ray
//! and Dask launchers, or any spawner that sets RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT) and
//! verifies all-reduce, broadcast, all-gather and barrier on Gloo. Run alone it forms a group of
//! one. Each wait is bounded by `TRAINBOOK_DIST_TIMEOUT` seconds (default 60). Prints one line
//! per rank on success; exits non-zero on any error or mismatch.
//!
//!     torchrun --standalone --nproc-per-node=3 --no-python target/debug/c10d-check
use std::process::ExitCode;
use std::time::Duration;

use tch::{Kind, Tensor};
use trainbook::dist::{self, Backend, LaunchEnv};

fn main() -> ExitCode {
    match run() {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("c10d-check: error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<String, String> {
    let timeout_s: u64 =
        std::env::var("TRAINBOOK_DIST_TIMEOUT").ok().and_then(|v| v.parse().ok()).unwrap_or(60);
    let env = match LaunchEnv::from_env().map_err(|e| e.to_string())? {
        Some(env) => env,
        None => LaunchEnv::single_process().map_err(|e| e.to_string())?,
    };
    let pg = dist::connect(&env, Backend::Gloo, Duration::from_secs(timeout_s))
        .map_err(|e| e.to_string())?;
    let (rank, world) = (pg.rank() as i64, pg.size() as i64);
    let e = |err: trainbook::Error| err.to_string();

    let small = Tensor::full([4], (rank + 1) as f64, (Kind::Float, tch::Device::Cpu));
    pg.all_reduce_sum(&small).map_err(e)?;
    let expected_sum = (world * (world + 1) / 2) as f64;
    expect_all(&small, expected_sum, "allreduce (small)")?;

    let n = 1 << 20;
    let big = Tensor::arange(n, (Kind::Float, tch::Device::Cpu)) * (rank + 1);
    pg.all_reduce_sum(&big).map_err(e)?;
    let want = Tensor::arange(n, (Kind::Float, tch::Device::Cpu)) * expected_sum;
    if !big.allclose(&want, 1e-6, 1e-3, false) {
        return Err(format!(
            "allreduce (1M floats): max diff {}",
            f64::try_from((&big - &want).abs().max()).unwrap_or(f64::NAN)
        ));
    }

    let root = (world - 1) as usize;
    let bcast = Tensor::full([3], rank as f64, (Kind::Double, tch::Device::Cpu));
    pg.broadcast(&bcast, root).map_err(e)?;
    expect_all(&bcast, root as f64, "broadcast")?;

    let mine = Tensor::from_slice(&[rank * 10, rank * 10 + 1]);
    let gathered = pg.all_gather(&mine).map_err(e)?;
    for (r, t) in gathered.iter().enumerate() {
        let got: Vec<i64> = Vec::try_from(t).map_err(|err: tch::TchError| err.to_string())?;
        let r = r as i64;
        if got != [r * 10, r * 10 + 1] {
            return Err(format!("all_gather: slot {r} holds {got:?}"));
        }
    }

    pg.barrier().map_err(e)?;
    Ok(format!(
        "c10d-check rank {rank}/{world} (via {}, local {}, agent store {}, libtorch {}): allreduce sum={expected_sum} ok, broadcast ok, all_gather ok, barrier ok",
        env.launcher,
        env.local_rank,
        env.agent_store,
        dist::torch_version()
    ))
}

fn expect_all(t: &Tensor, value: f64, what: &str) -> Result<(), String> {
    let values: Vec<f64> =
        Vec::try_from(t.to_kind(Kind::Double)).map_err(|e: tch::TchError| e.to_string())?;
    if values.iter().all(|v| *v == value) {
        Ok(())
    } else {
        Err(format!("{what}: expected every element = {value}, got {values:?}"))
    }
}
