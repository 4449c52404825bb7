//! The learning-rate range test (`Trainer::lr_find`, fastai's `lr_find`) against fastai's own
//! definitions (tests/oracle/lr_find.py runs `sched_exp` and `valley` from fastai's wheel): the
//! rates equal fastai's bit for bit, the smoothed losses equal fastai's `AvgSmoothLoss` on the
//! same step losses bit for bit, and the suggestion is the point fastai's `valley` picks. The
//! test stops when the smoothed loss diverges (and runs `num_it` steps, across epochs, when
//! told not to stop); afterwards the weights, the optimizer's state and rate and the random
//! generator are as before, bit for bit; on 2 Gloo ranks both record the same curve.
use crate::common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};
use trainbook::data::{DataLoader, TensorDataset};
use trainbook::dist::cpu_rng_state;
use trainbook::dist::Dist;
use trainbook::fit::Trainer;
use trainbook::launch::spawn;
use trainbook::models::MnistNet;
use trainbook::train::{LrFind, LrFindOptions, Optimizer};

const FASTAI: &str = "fastai==2.8.12";

/// fastai's wheel (downloaded once into cargo's target/tmp; `None` without network).
fn fastai_wheel() -> Option<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("oracle-wheels");
    let find = || {
        std::fs::read_dir(&dir).ok()?.filter_map(|e| e.ok().map(|e| e.path())).find(|p| {
            p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("fastai-2.8.12"))
        })
    };
    if let Some(w) = find() {
        return Some(w);
    }
    let out = Command::new(common::venv_bin("pip"))
        .args(["download", "--no-deps", "--disable-pip-version-check", "-q", "-d"])
        .arg(&dir)
        .arg(FASTAI)
        .output()
        .unwrap();
    if !out.status.success() {
        common::skip(
            "lr_find::the_range_test_follows_fastai",
            &format!("pip download {FASTAI}: {}", String::from_utf8_lossy(&out.stderr)),
        );
        return None;
    }
    find()
}

fn data(n: i64) -> Arc<TensorDataset> {
    tch::manual_seed(7);
    let x = Tensor::randn([n, 1, 28, 28], (Kind::Float, Device::Cpu));
    let y = Tensor::randint(10, [n], (Kind::Int64, Device::Cpu));
    Arc::new(TensorDataset::new(&x, &y, (0..10).map(|c| c.to_string()).collect()).unwrap())
}

/// Runs fastai's definitions on `found` and checks it against them.
fn check_against_fastai(found: &LrFind, find: &LrFindOptions, wheel: &Path, work: &Path) {
    let curve = serde_json::json!({
        "start_lr": find.start_lr, "end_lr": find.end_lr, "num_it": find.num_it,
        "lrs": found.lrs, "raw_losses": found.raw_losses, "losses": found.losses,
    });
    let (input, output) = (work.join("curve.json"), work.join("fastai.json"));
    std::fs::write(&input, curve.to_string()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/lr_find.py");
    let out = Command::new(common::venv_bin("python"))
        .arg(script)
        .args(["check".as_ref(), input.as_os_str(), wheel.as_os_str(), output.as_os_str()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let fastai: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&output).unwrap()).unwrap();
    assert_eq!(fastai["lrs_equal"], true, "rates: {} vs fastai's {}", curve["lrs"], fastai["lrs"]);
    assert_eq!(fastai["smoothed_equal"], true, "{} vs {}", curve["losses"], fastai["smoothed"]);
    let (lr, loss) = found.suggestion.expect("a suggestion");
    let ours = found.lrs.iter().position(|&l| l == lr).unwrap();
    assert_eq!(found.losses[ours], loss);
    assert_eq!(fastai["valley_index"].as_u64(), Some(ours as u64), "fastai's valley pick");
}

#[test]
fn the_range_test_follows_fastai_and_puts_everything_back() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("lr-find");
    let Some(wheel) = fastai_wheel() else { return };
    let dist = Dist::single(Device::Cpu);
    let ds = data(256);
    tch::manual_seed(3);
    let mut vs = VarStore::new(Device::Cpu);
    let net = MnistNet::new(&vs.root());
    let mut opt = Optimizer::sgd(&vs, 0.01, 0.9);
    let mut loader = DataLoader::from_arc(ds.clone(), 16).num_workers(0);
    let trainer = Trainer::new(&dist).progress(false);
    let (before, rng) = (common::training_state(&vs, &opt), cpu_rng_state().unwrap());

    // To 10: the loss blows up and the test stops early.
    let find = LrFindOptions { num_it: 60, end_lr: 1e4, ..Default::default() };
    let found = trainer.lr_find(&mut vs, &net, &mut opt, &mut loader, find).unwrap();
    let n = found.lrs.len();
    assert!(n < 60, "the loss diverged before 60 steps ({n})");
    let best = found.losses.iter().cloned().fold(f64::INFINITY, f64::min);
    assert!(found.losses[n - 1] > 4.0 * best, "it stopped on divergence");
    check_against_fastai(&found, &find, &wheel, &work);
    let after = common::training_state(&vs, &opt);
    assert_eq!(before.len(), after.len());
    for ((name, a), (_, b)) in before.iter().zip(&after) {
        assert!(a.equal(b), "{name} changed");
    }
    assert_eq!((opt.lr(), cpu_rng_state().unwrap()), (0.01, rng.clone()), "rate and RNG back");

    // Not stopping: 40 steps over 3 epochs of 16 batches.
    let find = LrFindOptions { num_it: 40, end_lr: 1e-2, stop_div: false, ..Default::default() };
    let found = trainer.lr_find(&mut vs, &net, &mut opt, &mut loader, find).unwrap();
    assert_eq!(found.lrs.len(), 40);
    check_against_fastai(&found, &find, &wheel, &work);
    let plot = trainbook::figures::lr_find_plot(&found).unwrap();
    assert_eq!((plot.width(), plot.height()), (800, 450));
    assert!(common::training_state(&vs, &opt).iter().zip(&before).all(|(a, b)| a.1.equal(&b.1)));

    // Two ranks: the same curve on both (each step's loss is the mean of the ranks').
    let curves = spawn(2, |dist| {
        let mut vs = VarStore::new(Device::Cpu);
        let net = MnistNet::new(&vs.root());
        let mut opt = Optimizer::sgd(&vs, 0.01, 0.9);
        let mut loader = DataLoader::from_arc(ds.clone(), 16).distributed(dist).num_workers(0);
        let find = LrFindOptions { num_it: 12, ..Default::default() };
        let f = Trainer::new(dist).progress(false).lr_find(
            &mut vs,
            &net,
            &mut opt,
            &mut loader,
            find,
        )?;
        Ok((f.lrs, f.losses, f.suggestion))
    })
    .unwrap();
    assert_eq!(curves[0], curves[1]);
    assert_eq!(curves[0].0.len(), 12);

    let bad = LrFindOptions { start_lr: 0.0, ..Default::default() };
    let err = trainer.lr_find(&mut vs, &net, &mut opt, &mut loader, bad).unwrap_err();
    assert!(err.to_string().contains("start_lr 0 and end_lr 10 must be positive"), "{err}");
}
