//! The ranks of a multi-rank `fit` agree on stopping at the next step: 2 ranks (this test
//! binary started twice, Gloo on the CPU), SIGUSR1 raised on rank 1 alone while it loads its
//! batch of step 4; both ranks stop after step 5, the same step, rank 1 saying "SIGUSR1" and
//! rank 0 "SIGUSR1 (another rank)", with one checkpoint; the resumed run ends on the weights of
//! an uninterrupted one.
//!
//! The cost of the agreement per step is measured with its own pattern (start an asynchronous
//! all-reduce of 3 doubles on the CPU group after a step, wait on it after the next) in a
//! DDP-like step (compute, then a blocking all-reduce of 100k floats), against the same steps
//! without it; it is printed, not asserted.
use crate::common;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use crate::common::ranks::run_ranks;
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};
use trainbook::data::{DataLoader, Dataset, TensorDataset};
use trainbook::dist::Dist;
use trainbook::fit::{FitReport, Trainer};
use trainbook::models::MnistNet;
use trainbook::train::Optimizer;
use trainbook::transforms::{AugRng, TensorImage};

const SAMPLES: usize = 64; // 8 steps of 4 per rank and epoch

/// Raises SIGUSR1 on `rank` the first time `at` is loaded there (sequential order).
struct Tripwire {
    inner: TensorDataset,
    at: Option<usize>,
    fired: AtomicUsize,
}

impl Dataset for Tripwire {
    fn len(&self) -> usize {
        self.inner.len()
    }
    fn get(&self, index: usize, rng: &mut AugRng) -> trainbook::Result<(TensorImage, i64)> {
        if Some(index) == self.at && self.fired.fetch_add(1, Ordering::SeqCst) == 0 {
            // SAFETY: raising a signal in this process; fit's handler catches it.
            unsafe { libc::raise(libc::SIGUSR1) };
        }
        self.inner.get(index, rng)
    }
    fn label(&self, index: usize) -> i64 {
        self.inner.label(index)
    }
    fn classes(&self) -> Vec<String> {
        self.inner.classes()
    }
}

fn data(seed: i64, n: usize) -> TensorDataset {
    tch::manual_seed(seed);
    let x = Tensor::randn([n as i64, 1, 28, 28], (Kind::Float, Device::Cpu));
    let y = Tensor::randint(10, [n as i64], (Kind::Int64, Device::Cpu));
    TensorDataset::new(&x, &y, (0..10).map(|c| c.to_string()).collect()).unwrap()
}

fn fit(dist: &Dist, out: &Path, at: Option<usize>, resume: bool) -> FitReport {
    let train = Tripwire { inner: data(1, SAMPLES), at, fired: AtomicUsize::new(0) };
    let mut train = DataLoader::new(train, 4).num_workers(0).distributed(dist);
    let mut val = DataLoader::new(data(2, 8), 4).num_workers(0).distributed(dist);
    tch::manual_seed(7);
    let mut vs = VarStore::new(Device::Cpu);
    let net = MnistNet::new(&vs.root());
    let mut opt = Optimizer::adam(&vs, 1e-3);
    tch::manual_seed(99 + dist.rank() as i64);
    Trainer::new(dist)
        .epochs(2)
        .out(out)
        .resume(resume)
        .keep_best(None)
        .progress(false)
        .fit(&mut vs, &net, &mut opt, &mut train, &mut val)
        .unwrap()
}

fn agree(out: &Path) {
    let dist = Dist::init().unwrap();
    let rank = dist.rank();
    fit(&dist, &out.join("whole"), None, false);
    // Rank 1's 4th batch (steps count from 1) holds its samples 12..16: sample index 2*13+1.
    let at = (rank == 1).then_some(2 * 13 + 1);
    let report = fit(&dist, &out.join("cut"), at, false);
    let stop = report.interrupted.expect("interrupted");
    println!("rank {rank}: stopped after {} batches: {}", stop.batches_done, stop.reason);
    let resumed = fit(&dist, &out.join("cut"), None, true);
    assert!(resumed.interrupted.is_none());

    // The agreement's pattern, timed inside a DDP-like step: some compute, then a blocking
    // all-reduce of 100k floats (the gradients), which keeps the ranks in step as DDP does.
    let pg = dist.process_group().unwrap();
    let a = Tensor::randn([128, 128], (Kind::Float, Device::Cpu));
    let grads = Tensor::zeros([100_000], (Kind::Float, Device::Cpu));
    let step = || {
        let mut c = a.matmul(&a);
        for _ in 0..3 {
            c = c.matmul(&a).tanh();
        }
        pg.all_reduce_sum(&grads).unwrap();
        c.double_value(&[0, 0])
    };
    const STEPS: u32 = 400;
    let timed = |agree: bool| {
        dist.barrier().unwrap();
        let (mut inside, mut pending) = (0.0, None);
        let t = Instant::now();
        for _ in 0..STEPS {
            step();
            if agree {
                let t0 = Instant::now();
                if let Some((work, flags)) = pending.take() {
                    let work: trainbook::dist::Work = work;
                    work.wait().unwrap();
                    let _: Vec<f64> = Vec::try_from(&flags).unwrap();
                }
                let flags = Tensor::from_slice(&[0.0f64, 0.0, 0.0]);
                pending = Some((pg.all_reduce_sum_async(&flags).unwrap(), flags));
                inside += t0.elapsed().as_secs_f64();
            }
        }
        if let Some((work, _)) = pending {
            work.wait().unwrap();
        }
        (t.elapsed().as_secs_f64() / STEPS as f64, inside / STEPS as f64)
    };
    let (plain, _) = timed(false);
    let (with, inside) = timed(true);
    let (plain2, _) = timed(false);
    println!(
        "rank {rank}: step {:.0} us without the agreement ({:.0} us again after), {:.0} us with \
         it; {:.1} us per step inside it",
        plain * 1e6,
        plain2 * 1e6,
        with * 1e6,
        inside * 1e6
    );
    dist.destroy().unwrap();
}

#[test]
#[ignore = "a rank of the tests below"]
fn rank_worker() {
    let _turn = common::module_turn(module_path!());
    let out = std::path::PathBuf::from(std::env::var("TB_OUT").unwrap_or_default());
    match std::env::var("TB_SCENARIO").as_deref() {
        Ok("agree") => agree(&out),
        other => panic!("unknown scenario {other:?}"),
    }
}

#[test]
fn two_ranks_stop_after_the_same_next_step_and_resume_exactly() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("stop-agreement");
    let stdout = run_ranks(module_path!(), "agree", 2, &work);
    println!("{stdout}");
    assert!(stdout.contains("rank 1: stopped after 5 batches: SIGUSR1\n"), "{stdout}");
    assert!(stdout.contains("rank 0: stopped after 5 batches: SIGUSR1 (another rank)"), "{stdout}");
    let (a, b) = (
        common::sorted_tensors(&work.join("whole/model.safetensors")),
        common::sorted_tensors(&work.join("cut/model.safetensors")),
    );
    assert!(!a.is_empty());
    assert_eq!(common::max_abs_diff(&a, &b), 0.0, "stop + resume left the trajectory");
}
