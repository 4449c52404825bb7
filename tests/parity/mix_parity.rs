//! MixUp and CutMix (`trainbook::transforms::MixUpCutMix`) against torchvision's
//! `transforms.v2.MixUp` / `CutMix` (tests/oracle/mix.py): for the same draws, the same images,
//! labels and CutMix box bit for bit (the same tensor operations); the draws themselves follow
//! torch's Beta distribution (a two-sample Kolmogorov-Smirnov test against torch's sampler) and
//! the recipe's equal choice between the two; bad input is an error naming it.
use crate::common;
use crate::random_crop_parity::ks;

use std::process::Command;

use rand::SeedableRng;
use tch::{Device, Kind, Tensor};
use trainbook::data::{DataLoader, TensorDataset};
use trainbook::transforms::{aug_rng, cutmix_box, AugRng, MixDraw, MixUpCutMix};

#[test]
fn the_same_draws_mix_as_torchvision_does() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("mix-parity");
    tch::manual_seed(5);
    let images = Tensor::randn([5, 3, 12, 16], (Kind::Float, Device::Cpu));
    let labels = Tensor::from_slice(&[3i64, 0, 9, 3, 7]);
    Tensor::write_safetensors(
        &[("images", &images), ("labels", &labels)],
        work.join("input.safetensors"),
    )
    .unwrap();
    // MixUp weights, and CutMix (weight, centre): inside, clipped at a corner, nearly empty.
    let draws: Vec<(f64, Option<(i64, i64)>)> = vec![
        (0.3, None),
        (0.9173, None),
        (0.4, Some((3, 7))),
        (0.05, Some((0, 11))),
        (0.999, Some((15, 0))),
    ];
    let json: Vec<serde_json::Value> = draws
        .iter()
        .map(|(lam, c)| match c {
            None => serde_json::json!(["mixup", lam]),
            Some((cx, cy)) => serde_json::json!(["cutmix", lam, cx, cy]),
        })
        .collect();
    std::fs::write(work.join("draws.json"), serde_json::to_string(&json).unwrap()).unwrap();
    let theirs = common::oracle_tensors("mix.py", "apply", &work);
    let mix = MixUpCutMix::new(1.0, 1.0, 10).unwrap();
    for (k, (lam, centre)) in draws.iter().enumerate() {
        let draw = match centre {
            None => MixDraw::MixUp { lam: *lam },
            Some(c) => cutmix_box(*lam, *c, 12, 16),
        };
        if let MixDraw::CutMix { boxed: (x1, y1, x2, y2), lam_adjusted } = draw {
            let b = common::get(&theirs, &format!("box_{k}"));
            let want: Vec<f64> = Vec::try_from(b).unwrap();
            assert_eq!(
                [x1 as f64, y1 as f64, x2 as f64, y2 as f64, lam_adjusted],
                want[..],
                "draw {k}"
            );
        }
        let (img, lab) = mix.apply(&draw, &images, &labels).unwrap();
        let (want_img, want_lab) = (
            common::get(&theirs, &format!("images_{k}")),
            common::get(&theirs, &format!("labels_{k}")),
        );
        assert_eq!(lab.kind(), Kind::Float);
        assert_eq!(common::max_abs(&img, want_img), 0.0, "images of draw {k}");
        assert_eq!(common::max_abs(&lab, want_lab), 0.0, "labels of draw {k}");
        // Probabilities: each row sums to 1.
        let sums: Vec<f32> = Vec::try_from(lab.sum_dim_intlist(1, false, Kind::Float)).unwrap();
        assert!(sums.iter().all(|s| (s - 1.0).abs() < 1e-6), "{sums:?}");
    }
}

#[test]
fn the_draws_follow_torchs_beta_and_choose_evenly() {
    let _turn = common::module_turn(module_path!());
    const N: usize = 4000;
    // The KS test's critical value at significance 1e-6 for two samples of N:
    // sqrt(-ln(1e-6 / 2) / 2) * sqrt(2 / N).
    let critical = (-(1e-6f64 / 2.0).ln() / 2.0).sqrt() * (2.0 / N as f64).sqrt();
    for alpha in [0.2, 1.0] {
        let out = Command::new(common::venv_bin("python"))
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oracle/mix.py"))
            .args(["beta", &alpha.to_string(), &N.to_string()])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let torch: Vec<f64> = serde_json::from_slice(&out.stdout).unwrap();
        let mix = MixUpCutMix::new(alpha, 0.0, 10).unwrap();
        let ours: Vec<f64> = (0..N as u64)
            .map(|i| match mix.draw(&mut aug_rng(1, 0, i), 8, 8) {
                MixDraw::MixUp { lam } => lam,
                other => panic!("MixUp only: {other:?}"),
            })
            .collect();
        let d = ks(ours, torch);
        assert!(d < critical, "alpha {alpha}: KS statistic {d} >= {critical}");
    }
    // Both on: CutMix in half the batches (binomial: within 5 standard deviations).
    let mix = MixUpCutMix::new(0.2, 1.0, 10).unwrap();
    let mut rng = AugRng::seed_from_u64(3);
    let cut = (0..N).filter(|_| matches!(mix.draw(&mut rng, 6, 8), MixDraw::CutMix { .. })).count();
    let sd = (N as f64 * 0.25).sqrt();
    assert!((cut as f64 - N as f64 / 2.0).abs() < 5.0 * sd, "{cut} of {N} batches CutMix");
}

#[test]
fn bad_settings_and_batches_are_errors_naming_them() {
    let _turn = common::module_turn(module_path!());
    let err = MixUpCutMix::new(0.0, 0.0, 10).unwrap_err().to_string();
    assert!(err.contains("both 0"), "{err}");
    let err = MixUpCutMix::new(-1.0, 1.0, 10).unwrap_err().to_string();
    assert!(err.contains("mixup_alpha -1"), "{err}");
    let err = MixUpCutMix::new(1.0, f64::NAN, 10).unwrap_err().to_string();
    assert!(err.contains("cutmix_alpha"), "{err}");
    assert!(MixUpCutMix::new(1.0, 0.0, 0).unwrap_err().to_string().contains("num_classes"));
    let mix = MixUpCutMix::new(1.0, 0.0, 3).unwrap();
    let images = Tensor::zeros([2, 3, 4, 4], (Kind::Float, Device::Cpu));
    let draw = MixDraw::MixUp { lam: 0.5 };
    let err = mix.apply(&draw, &images, &Tensor::from_slice(&[0i64, 3])).unwrap_err().to_string();
    assert!(err.contains("0..3"), "{err}");
    let err = mix.apply(&draw, &images, &Tensor::from_slice(&[0i64])).unwrap_err().to_string();
    assert!(err.contains("[2, 3, 4, 4]") && err.contains("[1]"), "{err}");
    let wide = Tensor::zeros([2, 4], (Kind::Float, Device::Cpu));
    let err = mix.apply(&draw, &images, &wide).unwrap_err().to_string();
    assert!(err.contains("[2, 4]") && err.contains("[B, 3]"), "{err}");
}

/// Every batch of an epoch of `loader`: (images, targets, labels).
fn epoch_of(loader: &mut DataLoader<TensorDataset>) -> Vec<(Tensor, Tensor, Tensor)> {
    let batches = loader.iter().map(|b| b.unwrap());
    batches.map(|b| (b.images, b.targets.expect("mixed targets"), b.labels)).collect()
}

#[test]
fn a_loader_mixes_each_batch_the_same_with_any_workers_and_after_a_resume() {
    let _turn = common::module_turn(module_path!());
    tch::manual_seed(2);
    let x = Tensor::randn([24, 3, 8, 8], (Kind::Float, Device::Cpu));
    let y = Tensor::randint(5, [24], (Kind::Int64, Device::Cpu));
    let make = |workers: usize| {
        let ds = TensorDataset::new(&x, &y, (0..5).map(|c| c.to_string()).collect()).unwrap();
        DataLoader::new(ds, 4)
            .shuffle(true)
            .seed(9)
            .num_workers(workers)
            .batch_mix(MixUpCutMix::new(0.2, 1.0, 5).unwrap())
    };
    let (mut inline, mut threaded) = (make(0), make(2));
    inline.set_epoch(1);
    threaded.set_epoch(1);
    let (a, b) = (epoch_of(&mut inline), epoch_of(&mut threaded));
    assert_eq!(a.len(), 6);
    for (k, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(common::max_abs(&x.0, &y.0), 0.0, "images of batch {k}");
        assert_eq!(common::max_abs(&x.1, &y.1), 0.0, "targets of batch {k}");
        assert_eq!(x.1.size(), [4, 5], "class probabilities");
        let argmax = x.1.max_dim(1, false).1;
        assert_eq!(common::max_abs(&x.2, &argmax), 0.0, "labels: the most probable class");
    }
    // Mixed: some batch's targets are not one-hot.
    let soft = a.iter().any(|(_, t, _)| t.max().double_value(&[]) < 1.0);
    assert!(soft, "no batch was mixed");
    // Resumed at batch 3 of epoch 1: the same last three batches.
    let mut resumed = make(2);
    resumed.set_epoch(1);
    resumed.skip_batches(3);
    let c = epoch_of(&mut resumed);
    for (k, (x, y)) in a[3..].iter().zip(&c).enumerate() {
        assert_eq!(common::max_abs(&x.0, &y.0), 0.0, "images of resumed batch {k}");
        assert_eq!(common::max_abs(&x.1, &y.1), 0.0, "targets of resumed batch {k}");
    }
    // Another epoch mixes differently.
    inline.set_epoch(2);
    let d = epoch_of(&mut inline);
    assert!(d.iter().zip(&a).any(|(x, y)| common::max_abs(&x.1, &y.1) > 0.0));
}

#[test]
fn fit_mixes_the_training_batches_for_the_run_only() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("mix-fit");
    let dist = trainbook::dist::Dist::single(Device::Cpu);
    let fit = |trainer: trainbook::fit::Trainer| {
        let mut vs = tch::nn::VarStore::new(Device::Cpu);
        let net = trainbook::models::MnistNet::new(&vs.root());
        let mut opt = trainbook::train::Optimizer::sgd(&vs, 0.01, 0.0);
        let (mut train, mut val) =
            (common::random_mnist_loader(1, 8), common::random_mnist_loader(2, 4));
        let report = trainer.progress(false).fit(&mut vs, &net, &mut opt, &mut train, &mut val);
        (report, train.batch_mixing().is_some())
    };
    let trainer = trainbook::fit::Trainer::new(&dist).out(work.join("mixed"));
    let (report, still) = fit(trainer.mixup_cutmix(0.2, 1.0));
    let report = report.unwrap();
    assert!(!still, "the loader's own setting (none) is back");
    let acc = report.history[0].train_acc;
    assert!((0.0..=1.0).contains(&acc), "accuracy over the most probable classes: {acc}");
    let trainer = trainbook::fit::Trainer::new(&dist).out(work.join("none"));
    let err = fit(trainer.mixup_cutmix(0.0, 0.0)).0.unwrap_err().to_string();
    assert!(err.contains("both 0"), "{err}");
    assert!(!work.join("none/metrics.jsonl").exists(), "nothing trained");
}
