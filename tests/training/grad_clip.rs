//! Gradient clipping against PyTorch (tests/oracle/clip.py, the venv's torch, one thread):
//! - `clip_grad_norm` / `clip_grad_value` on the MNIST CNN's gradients give torch's total norm
//!   and clipped gradients bit for bit, for the 2-, 1- and inf-norms, an idle bound (the
//!   coefficient clamped to 1) and value clipping: same kernels (`_foreach_norm`,
//!   `linalg.vector_norm`, the coefficient as torch computes it) on the same gradients;
//! - with a float16-style `GradScaler` (`unscale_`, clip, `step`, an inf injected): the scale
//!   sequence and the skipped step equal torch's, the norms and weights follow it (1e-5
//!   relative, as tests/training/amp.rs allows for the optimizers), the first norm bit for bit;
//! - `train_epoch` with `EpochOptions::clip_grad` equals the hand-written loop bit for bit and
//!   reports the mean norm; `Trainer::clip_grad_norm` writes it to `metrics.jsonl`.
use crate::common;

use std::cell::RefCell;

use crate::common::{get, max_abs, with_prefix};
use tch::nn::{ModuleT, VarStore};
use tch::{Device, Kind, Tensor};
use trainbook::data::{DataLoader, TensorDataset};
use trainbook::models::{load_state_dict, MnistNet};
use trainbook::train::{
    clip_grad_norm, clip_grad_value, train_epoch, CrossEntropyLoss, EpochOptions, GradClip,
    GradScaler, GradScalerConfig, Kernels, Optimizer,
};

fn oracle(cmd: &str, dir: &std::path::Path) -> Vec<(String, Tensor)> {
    common::oracle_tensors("clip.py", cmd, dir)
}

/// The CNN's parameter names in torch's order (the order clip_grad_norm_ sums the norms in).
const NAMES: [&str; 8] = [
    "conv1.weight",
    "conv1.bias",
    "conv2.weight",
    "conv2.bias",
    "fc1.weight",
    "fc1.bias",
    "fc2.weight",
    "fc2.bias",
];

#[test]
fn clipping_equals_torch_bit_for_bit() {
    let _turn = common::module_turn(module_path!());
    tch::set_num_threads(1);
    let dir = common::WorkDir::new("clip-grads");
    let ts = oracle("grads", &dir);
    let cases: [(&str, Option<GradClip>); 5] = [
        ("norm2", Some(GradClip::norm(0.05))),
        ("norm2_idle", Some(GradClip::norm(1000.0))),
        ("norm1", Some(GradClip::Norm { max_norm: 0.5, norm_type: 1.0 })),
        ("norminf", Some(GradClip::Norm { max_norm: 0.01, norm_type: f64::INFINITY })),
        ("value", None),
    ];
    for (case, clip) in cases {
        let grads: Vec<Tensor> =
            NAMES.iter().map(|n| get(&ts, &format!("raw.{n}")).copy()).collect();
        match clip {
            Some(GradClip::Norm { max_norm, norm_type }) => {
                let norm = clip_grad_norm(&grads, max_norm, norm_type).unwrap();
                let want = get(&ts, &format!("{case}.norm")).get(0);
                assert!(norm.equal(&want), "{case}: norm {norm:?} vs torch's {want:?}");
            }
            _ => clip_grad_value(&grads, 0.001),
        }
        for (name, g) in NAMES.iter().zip(&grads) {
            let want = get(&ts, &format!("{case}.grad.{name}"));
            assert!(g.equal(want), "{case}: {name} differs by {}", max_abs(g, want));
        }
        let moved = NAMES.iter().zip(&grads).any(|(n, g)| !g.equal(get(&ts, &format!("raw.{n}"))));
        assert_eq!(moved, case != "norm2_idle", "{case}: whether clipping changed anything");
    }
}

#[test]
fn unscale_then_clip_then_step_follows_torch() {
    let _turn = common::module_turn(module_path!());
    tch::set_num_threads(1);
    let dir = common::WorkDir::new("clip-scaler");
    let ts = oracle("scaler", &dir);
    let (x, y) = (get(&ts, "x"), get(&ts, "y"));
    let loss_fn = CrossEntropyLoss::new();
    for name in ["sgd", "adam"] {
        let mut vs = VarStore::new(Device::Cpu);
        let net = MnistNet::new(&vs.root());
        load_state_dict(&mut vs, &with_prefix(&ts, "init."), true).unwrap();
        let mut opt = if name == "sgd" {
            Optimizer::sgd(&vs, 0.05, 0.9).with_kernels(Kernels::PerTensor)
        } else {
            Optimizer::adam(&vs, 1e-3)
        };
        let config =
            GradScalerConfig { init_scale: 1024.0, growth_interval: 3, ..Default::default() };
        let mut scaler = GradScaler::with_config(Device::Cpu, config);
        let fc2 = vs.variables()["fc2.weight"].shallow_clone();
        let (mut norms, mut scales, mut changed) = (Vec::new(), Vec::new(), Vec::new());
        for step in 0..6 {
            let before = fc2.copy();
            opt.zero_grad();
            scaler.scale(&loss_fn.mean(&net.forward_t(x, false), y)).backward();
            if step == 2 {
                let _ = vs.variables()["fc2.bias"].grad().get(0).fill_(f64::INFINITY);
            }
            scaler.unscale_(&opt).unwrap();
            let again = scaler.unscale_(&opt).unwrap_err().to_string();
            assert!(again.contains("already"), "{again}");
            norms.push(GradClip::norm(0.05).apply(&opt).unwrap().unwrap().double_value(&[]));
            let _ = scaler.step(&mut opt).unwrap();
            scales.push(scaler.current_scale());
            changed.push(if before.equal(&fc2) { 0.0 } else { 1.0 });
        }
        let want = |k: &str| Vec::<f64>::try_from(get(&ts, &format!("{name}.{k}"))).unwrap();
        assert_eq!(scales, want("scales"), "{name}: scale sequence");
        assert_eq!(changed, want("changed"), "{name}: which steps updated the weights");
        let want_norms = want("norms");
        assert_eq!(norms[0], want_norms[0], "{name}: the first norm (same weights) bit for bit");
        assert!(norms[2].is_infinite() && want_norms[2].is_infinite(), "{name}: the inf step");
        for (step, (a, b)) in norms.iter().zip(&want_norms).enumerate().filter(|(s, _)| *s != 2) {
            assert!((a - b).abs() <= 1e-5 * b.abs(), "{name} step {step}: norm {a} vs {b}");
        }
        for (pname, p) in vs.variables() {
            let want = get(&ts, &format!("{name}.final.{pname}"));
            let rel = max_abs(&p, want) / want.abs().max().double_value(&[]).max(1e-12);
            assert!(rel <= 1e-5, "{name} {pname}: relative difference {rel}");
        }
    }
}

/// Two CNNs with the same weights, 24 samples and a loader of batch 8.
fn twins() -> (VarStore, MnistNet, VarStore, MnistNet, DataLoader<TensorDataset>, Tensor, Tensor) {
    tch::manual_seed(4);
    let (a, mut b) = (VarStore::new(Device::Cpu), VarStore::new(Device::Cpu));
    let (net_a, net_b) = (MnistNet::new(&a.root()), MnistNet::new(&b.root()));
    b.copy(&a).unwrap();
    let x = Tensor::randn([24, 1, 28, 28], (Kind::Float, Device::Cpu));
    let y = Tensor::randint(10, [24], (Kind::Int64, Device::Cpu));
    let loader = DataLoader::new(TensorDataset::new(&x, &y, vec![]).unwrap(), 8).num_workers(0);
    (a, net_a, b, net_b, loader, x, y)
}

#[test]
fn train_epoch_clips_as_the_hand_written_loop_and_reports_the_mean_norm() {
    let _turn = common::module_turn(module_path!());
    for scaled in [false, true] {
        let (a, net_a, b, net_b, mut loader, x, y) = twins();
        let (mut opt_a, mut opt_b) = (Optimizer::sgd(&a, 0.1, 0.9), Optimizer::sgd(&b, 0.1, 0.9));
        let loss_fn = CrossEntropyLoss::new();
        let scaler = RefCell::new(GradScaler::new(Device::Cpu));
        let mut opts = EpochOptions::on(Device::Cpu).quiet().clip_grad(GradClip::norm(0.5));
        if scaled {
            opts = opts.grad_scaler(&scaler);
        }
        // The epoch's forward passes run in train mode (dropout): same draws on both sides.
        tch::manual_seed(9);
        let epoch = train_epoch(&net_a, &mut loader, &mut opt_a, &loss_fn, &opts).unwrap();
        tch::manual_seed(9);
        let mut hand_scaler = GradScaler::new(Device::Cpu);
        let mut norms = Vec::new();
        for i in 0..3 {
            let (xb, yb) = (x.narrow(0, 8 * i, 8), y.narrow(0, 8 * i, 8));
            let loss = loss_fn.mean(&net_b.forward_t(&xb, true), &yb);
            opt_b.zero_grad();
            if scaled {
                hand_scaler.scale(&loss).backward();
                hand_scaler.unscale_(&opt_b).unwrap();
            } else {
                loss.backward();
            }
            let grads: Vec<Tensor> = opt_b.parameters().iter().map(|(_, p)| p.grad()).collect();
            norms.push(clip_grad_norm(&grads, 0.5, 2.0).unwrap().double_value(&[]));
            if scaled {
                let _ = hand_scaler.step(&mut opt_b).unwrap();
            } else {
                opt_b.step().unwrap();
            }
        }
        for (name, p) in a.variables() {
            assert!(p.equal(&b.variables()[&name]), "scaled {scaled}: {name}");
        }
        let mean = norms.iter().sum::<f64>() / 3.0;
        let got = epoch.grad_norm.expect("the epoch reports the mean norm");
        assert!((got - mean).abs() <= 1e-12 * mean, "scaled {scaled}: {got} vs {mean}");
        assert!(norms.iter().any(|n| *n > 0.5), "the bound was active: {norms:?}");
    }
}

#[test]
fn trainer_records_the_norm_and_refuses_a_bad_bound() {
    let _turn = common::module_turn(module_path!());
    use trainbook::dist::Dist;
    use trainbook::fit::Trainer;
    let dist = Dist::single(Device::Cpu);
    let work = common::WorkDir::new("clip-fit");
    let (mut vs, net, _, _, mut train, _, _) = twins();
    let (_, _, _, _, mut val, _, _) = twins();
    let mut opt = Optimizer::sgd(&vs, 0.1, 0.9);
    let trainer = || Trainer::new(&dist).out(work.join("run")).progress(false).resume(false);
    let report =
        trainer().clip_grad_norm(0.5).fit(&mut vs, &net, &mut opt, &mut train, &mut val).unwrap();
    let norm = report.history[0].grad_norm.expect("the epoch's record has the norm");
    let log = std::fs::read_to_string(work.join("run/metrics.jsonl")).unwrap();
    assert!(log.contains(&format!("\"grad_norm\":{norm}")), "{log}");
    // Without class names (a bare TensorDataset) there is no confusion plot, and the run ends.
    assert!(work.join("run/model.safetensors").exists());
    let err = trainer()
        .clip_grad_value(-1.0)
        .fit(&mut vs, &net, &mut opt, &mut train, &mut val)
        .unwrap_err()
        .to_string();
    assert!(err.contains("gradient clipping"), "{err}");
}
