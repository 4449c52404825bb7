//! `launch::spawn`: a closure run as 2 thread ranks computes exactly what the same code computes
//! as 2 processes under torchrun (MNIST CNN with dropout, DDP, shuffled sharded loader; weights
//! compared bit for bit), a changed hyper-parameter reaches the ranks, a failing or panicking
//! rank ends the job with its error, and `Trainer::fit` runs inside the ranks.
//!
//! Why equality holds by construction: both sides run the same kernels with one intra-op
//! thread per rank (torchrun's OMP_NUM_THREADS=1, spawn's default), Gloo sums two values
//! (commutative, so exact), and each thread rank draws from its own CPU generator stream
//! (spawn's turns), which starts where the caller's was, as each process's does.
use crate::common;

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use trainbook::data::TensorDataset;
use trainbook::launch::{spawn_with, SpawnOptions};
use trainbook::prelude::*;
use trainbook::train::{train_epoch, EpochOptions, Optimizer, OptimizerKind};

/// spawn's thread ranks take turns on the process's CPU generator; other tests drawing from it
/// at the same time would change their streams, so this module's tests run one at a time (and
/// the other modules of the binary wait for their turn: `common::module_turn`).
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// One rank's run: data drawn from the CPU generator (the same on every rank, as in processes),
/// a fresh MNIST CNN, DDP, two epochs of SGD with dropout; returns the weights followed by three
/// further draws of the rank's generator.
fn train(dist: &Dist, lr: f64) -> Result<Vec<f32>> {
    let x = Tensor::randn([32, 1, 28, 28], (Kind::Float, Device::Cpu));
    let y = Tensor::randint(10, [32], (Kind::Int64, Device::Cpu));
    let vs = VarStore::new(dist.device());
    let net = MnistNet::new(&vs.root());
    let ddp = Ddp::wrap(&vs, dist)?;
    let sgd =
        OptimizerKind::Sgd { momentum: 0.9, dampening: 0.0, nesterov: false, weight_decay: 0.0 };
    let mut opt = Optimizer::new(&vs, sgd, lr);
    let mut loader = DataLoader::new(TensorDataset::new(&x, &y, vec![])?, 4)
        .shuffle(true)
        .seed(5)
        .num_workers(0)
        .distributed(dist);
    let opts = EpochOptions::default().quiet().hooks(&ddp);
    for epoch in 0..2 {
        loader.set_epoch(epoch);
        train_epoch(&net, &mut loader, &mut opt, &CrossEntropyLoss::new(), &opts)?;
    }
    let mut named = vs.variables().into_iter().collect::<Vec<_>>();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    let mut parts: Vec<Tensor> = named.iter().map(|(_, t)| t.detach().flatten(0, -1)).collect();
    parts.push(Tensor::rand([3], (Kind::Float, Device::Cpu)));
    Ok(Vec::try_from(Tensor::cat(&parts, 0))?)
}

/// "Earlier cells" (a seed), the launch, and the caller's next draw after it.
fn job(lr: f64) -> Result<(Vec<Vec<f32>>, Vec<f32>)> {
    tch::manual_seed(3);
    let ranks = spawn(2, |dist| train(dist, lr))?;
    let next = Vec::try_from(Tensor::rand([3], (Kind::Float, Device::Cpu)))?;
    Ok((ranks, next))
}

/// The process side: this binary under torchrun runs `job` (spawn sees the launcher) and rank 0
/// writes what it got to TB_SPAWN_OUT.
#[test]
#[ignore = "run by thread_ranks_equal_torchrun_processes under torchrun"]
fn spawn_child() {
    let _turn = common::module_turn(module_path!());
    let lr: f64 = std::env::var("TB_SPAWN_LR").unwrap().parse().unwrap();
    let (ranks, next) = job(lr).unwrap();
    if std::env::var("RANK").as_deref() == Ok("0") {
        let json = serde_json::to_vec(&(ranks, next)).unwrap();
        std::fs::write(std::env::var("TB_SPAWN_OUT").unwrap(), json).unwrap();
    }
}

fn under_torchrun(lr: f64) -> (Vec<Vec<f32>>, Vec<f32>) {
    let dir = tempfile::tempdir().unwrap();
    let out: PathBuf = dir.path().join("ranks.json");
    let envs = [("TB_SPAWN_LR", lr.to_string().into()), ("TB_SPAWN_OUT", out.clone().into())];
    common::ranks::torchrun_child(&common::test_name(module_path!(), "spawn_child"), &envs);
    serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap()
}

#[test]
fn thread_ranks_equal_torchrun_processes() {
    let _turn = common::module_turn(module_path!());
    let _serial = serial();
    let (threads, next) = job(0.1).unwrap();
    assert_eq!(threads.len(), 2);
    assert_eq!(threads[0], threads[1], "DDP keeps the ranks' weights equal");
    let (processes, process_next) = under_torchrun(0.1);
    assert_eq!(threads, processes, "thread ranks and torchrun processes differ");
    assert_eq!(next, process_next, "the caller's generator continues where rank 0's ended");

    // A hyper-parameter changed "in an earlier cell" reaches the ranks.
    let (slower, _) = job(0.05).unwrap();
    assert_ne!(slower[0], threads[0]);
    // And the same launch again gives the same numbers (no interleaving of random draws).
    assert_eq!(job(0.1).unwrap().0, threads);
}

#[test]
fn a_failing_rank_ends_the_job_with_its_error() {
    let _turn = common::module_turn(module_path!());
    let _serial = serial();
    let opts = SpawnOptions { timeout: Duration::from_secs(20), ..SpawnOptions::default() };
    let start = Instant::now();
    let result: Result<Vec<()>> = spawn_with(2, opts, |dist| {
        if dist.rank() == 1 {
            return Err(Error::InvalidArgument("rank one gives up".into()));
        }
        dist.barrier()
    });
    let err = result.expect_err("the job fails");
    assert!(matches!(err, Error::Rank { rank: 1, world: 2, .. }), "{err}");
    assert!(err.to_string().contains("rank one gives up"), "{err}");
    assert!(start.elapsed() < Duration::from_secs(20), "took {:?}", start.elapsed());
}

#[test]
fn a_panicking_rank_is_an_error_and_the_caller_goes_on() {
    let _turn = common::module_turn(module_path!());
    let _serial = serial();
    let result: Result<Vec<usize>> = spawn(2, |dist| {
        if dist.rank() == 0 {
            panic!("boom in rank zero");
        }
        Ok(dist.rank())
    });
    let err = result.expect_err("the job fails");
    assert!(matches!(err, Error::Rank { rank: 0, .. }), "{err}");
    assert!(err.to_string().contains("boom in rank zero"), "{err}");
    // The process is fine: a new job runs.
    assert_eq!(spawn(2, |dist| Ok(dist.rank())).unwrap(), vec![0, 1]);
    assert!(matches!(spawn(0, |_| Ok(())), Err(Error::InvalidArgument(_))));
}

fn sigint_action() -> libc::sighandler_t {
    // SAFETY: queries the current action without changing it.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGINT, std::ptr::null(), &mut old);
        old.sa_sigaction
    }
}

#[test]
fn trainer_fit_runs_in_thread_ranks_and_returns_its_report() {
    let _turn = common::module_turn(module_path!());
    let _serial = serial();
    let before = sigint_action();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_path_buf();
    tch::manual_seed(1);
    let reports = spawn(2, |dist| {
        let x = Tensor::randn([24, 1, 28, 28], (Kind::Float, Device::Cpu));
        let y = Tensor::randint(10, [24], (Kind::Int64, Device::Cpu));
        let classes: Vec<String> = (0..10).map(|c| c.to_string()).collect();
        let data = || TensorDataset::new(&x, &y, classes.clone());
        let mut train = DataLoader::new(data()?, 4).shuffle(true).distributed(dist);
        let mut val = DataLoader::new(data()?, 6).distributed(dist);
        let mut vs = VarStore::new(dist.device());
        let net = MnistNet::new(&vs.root());
        let sgd = OptimizerKind::Sgd {
            momentum: 0.0,
            dampening: 0.0,
            nesterov: false,
            weight_decay: 0.0,
        };
        let mut opt = Optimizer::new(&vs, sgd, 0.01);
        Trainer::new(dist)
            .epochs(1)
            .out(&out)
            .progress(false)
            .fit(&mut vs, &net, &mut opt, &mut train, &mut val)
    })
    .unwrap();
    assert_eq!(reports.len(), 2);
    assert_eq!(reports[0].history.len(), 1);
    assert_eq!(reports[0].history[0].world_size, 2);
    let (a, b) = (&reports[0].history[0], &reports[1].history[0]);
    assert_eq!((a.train_loss, a.train_acc, a.val_acc), (b.train_loss, b.train_acc, b.val_acc));
    assert_eq!(sigint_action(), before, "the caller's SIGINT action is back");
}
