//! Mixed precision against PyTorch (the venv's torch, one thread on both sides):
//! bf16 autocast training of the MNIST CNN and of the course ResNet34 follows
//! `torch.autocast("cpu", dtype=torch.bfloat16)` step for step, and `GradScaler` with injected
//! inf gradients gives torch's scale sequence and skips the same steps, for SGD (unscale, then
//! a step only when finite) and for fused Adam (the kernel unscales and skips). With SGD the
//! inf flag stays on the device: a skipped step changes nothing, a taken one is bit for bit
//! the unscaled step, and neither reads the device.
use crate::common;

use std::cell::RefCell;

use crate::common::{get, max_abs, with_prefix};
use tch::nn::{ModuleT, VarStore};
use tch::{Device, Kind, Tensor};
use trainbook::data::{DataLoader, TensorDataset};
use trainbook::models::{load_state_dict, resnet34_classifier, MnistNet};
use trainbook::train::{
    host_reads, train_epoch, CrossEntropyLoss, EpochOptions, GradScaler, GradScalerConfig, Kernels,
    Optimizer, OptimizerKind, Precision,
};

/// The tests that count reads of the device (`host_reads`, a process-wide count) run one at a
/// time with those that make such reads.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn oracle(cmd: &str, dir: &std::path::Path) -> Vec<(String, Tensor)> {
    common::oracle_tensors("amp.py", cmd, dir)
}

#[test]
fn bf16_autocast_training_follows_torch_autocast() {
    let _turn = common::module_turn(module_path!());
    tch::set_num_threads(1);
    let dir = common::WorkDir::new("amp-bf16");
    let ts = oracle("bf16", &dir);
    for name in ["mnist", "resnet"] {
        let mut vs = VarStore::new(Device::Cpu);
        let (net, train): (Box<dyn ModuleT>, bool) = if name == "mnist" {
            (Box::new(MnistNet::new(&vs.root())), false)
        } else {
            (Box::new(resnet34_classifier(&vs.root(), 3)), true)
        };
        load_state_dict(&mut vs, &with_prefix(&ts, &format!("{name}.init.")), true).unwrap();
        let mut opt = Optimizer::sgd(&vs, 0.05, 0.9);
        let (x, y) = (get(&ts, &format!("{name}.x")), get(&ts, &format!("{name}.y")));
        let loss_fn = CrossEntropyLoss::new().label_smoothing(0.1);
        let mut losses = Vec::new();
        for _ in 0..3 {
            opt.zero_grad();
            let loss = Precision::Bf16
                .run(Device::Cpu, || loss_fn.mean(&net.forward_t(x, train), y))
                .unwrap();
            assert_eq!(
                loss.kind(),
                Kind::Float,
                "cross-entropy runs in float32 under autocast, as in torch"
            );
            loss.backward();
            opt.step().unwrap();
            losses.push(loss.double_value(&[]));
        }
        // Tolerance: the same libtorch kernels on the same thread count make equality the
        // expectation; what may still differ is the rounding of a float32 sum before its cast to
        // bfloat16, which can flip one bf16 rounding (unit roundoff 2^-8) inside a layer. So a
        // loss may move by 2^-8 of itself, and a weight by 2^-8 of the distance it travelled.
        let want: Vec<f64> = Vec::try_from(get(&ts, &format!("{name}.losses"))).unwrap();
        println!("{name}: losses {losses:?} vs torch {want:?}");
        for (a, b) in losses.iter().zip(&want) {
            assert!((a - b).abs() <= b.abs() / 256.0, "{name}: loss {a} vs torch {b}");
        }
        let (mut worst, mut worst_rel) = (0.0f64, 0.0f64);
        for (pname, p) in vs.variables() {
            let (init, fin) = (
                get(&ts, &format!("{name}.init.{pname}")),
                get(&ts, &format!("{name}.final.{pname}")),
            );
            if p.kind() != Kind::Float {
                assert!(p.equal(fin), "{name} {pname}");
                continue;
            }
            let travelled = max_abs(fin, init);
            let diff = max_abs(&p, fin);
            worst = worst.max(diff);
            worst_rel = worst_rel.max(diff / travelled.max(1e-12));
            assert!(
                diff <= travelled / 256.0 + 1e-7,
                "{name} {pname}: {diff:e} from torch after travelling {travelled:e}"
            );
        }
        println!("{name}: losses {losses:?} vs torch {want:?}; weights max |diff| {worst:e} ({worst_rel:e} of the distance travelled)");
    }
}

#[test]
fn grad_scaler_matches_torch_with_injected_infs() {
    let _turn = common::module_turn(module_path!());
    let _serial = serial();
    tch::set_num_threads(1);
    let dir = common::WorkDir::new("amp-scaler");
    let ts = oracle("scaler", &dir);
    let (x, y) = (get(&ts, "x"), get(&ts, "y"));
    let loss_fn = CrossEntropyLoss::new().label_smoothing(0.1);
    for name in ["sgd", "adam"] {
        let mut vs = VarStore::new(Device::Cpu);
        let net = MnistNet::new(&vs.root());
        load_state_dict(&mut vs, &with_prefix(&ts, "init."), true).unwrap();
        let mut opt = if name == "sgd" {
            Optimizer::sgd(&vs, 0.05, 0.9).with_kernels(Kernels::PerTensor)
        } else {
            Optimizer::adam(&vs, 1e-3)
        };
        assert_eq!(opt.fuses_loss_scaling(), name == "adam");
        let mut scaler = GradScaler::with_config(
            Device::Cpu,
            GradScalerConfig { init_scale: 1024.0, growth_interval: 3, ..Default::default() },
        );
        let fc2 = vs.variables()["fc2.weight"].shallow_clone();
        let (mut scales, mut changed) = (Vec::new(), Vec::new());
        for step in 0..8 {
            let before = fc2.copy();
            opt.zero_grad();
            scaler.scale(&loss_fn.mean(&net.forward_t(x, false), y)).backward();
            if step == 2 || step == 5 {
                let _ = vs.variables()["fc2.bias"].grad().get(0).fill_(f64::INFINITY);
            }
            let found_inf = scaler.step(&mut opt).unwrap();
            assert_eq!(found_inf.double_value(&[]), if step == 2 || step == 5 { 1.0 } else { 0.0 });
            scales.push(scaler.current_scale());
            changed.push(if before.equal(&fc2) { 0.0 } else { 1.0 });
        }
        let want_scales: Vec<f64> = Vec::try_from(get(&ts, &format!("{name}.scales"))).unwrap();
        let want_changed: Vec<f64> = Vec::try_from(get(&ts, &format!("{name}.changed"))).unwrap();
        assert_eq!(scales, want_scales, "{name}: scale sequence");
        assert_eq!(changed, want_changed, "{name}: which steps updated the weights");
        // Scaling by powers of two is exact, so the weights follow torch as closely as the
        // unscaled optimizers do (tests/parity/models_parity.rs: 1e-5 relative).
        for (pname, p) in vs.variables() {
            let want = get(&ts, &format!("{name}.final.{pname}"));
            let rel = max_abs(&p, want) / want.abs().max().double_value(&[]).max(1e-12);
            assert!(rel <= 1e-5, "{name} {pname}: relative difference {rel}");
        }
        // The state a checkpoint keeps comes back.
        let state = scaler.state();
        let mut fresh = GradScaler::new(Device::Cpu);
        fresh.load_state(&state);
        assert_eq!(fresh.state(), state);
    }
}

#[test]
fn train_epoch_runs_in_bf16_and_in_f16_with_a_grad_scaler() {
    let _turn = common::module_turn(module_path!());
    let _serial = serial();
    tch::manual_seed(5);
    let x = Tensor::randn([32, 1, 28, 28], (Kind::Float, Device::Cpu));
    let y = Tensor::randint(10, [32], (Kind::Int64, Device::Cpu));
    let mut data = DataLoader::new(
        TensorDataset::new(&x, &y, (0..10).map(|c| c.to_string()).collect()).unwrap(),
        8,
    )
    .num_workers(0);
    let loss_fn = CrossEntropyLoss::new();
    for precision in [Precision::Bf16, Precision::F16] {
        let vs = VarStore::new(Device::Cpu);
        let net = MnistNet::new(&vs.root());
        let mut opt = Optimizer::adam(&vs, 1e-3);
        let scaler = RefCell::new(GradScaler::new(Device::Cpu));
        let mut opts = EpochOptions::on(Device::Cpu).quiet().precision(precision);
        if precision == Precision::F16 {
            opts = opts.grad_scaler(&scaler);
        }
        let before = vs.variables()["fc2.weight"].copy();
        let t = train_epoch(&net, &mut data, &mut opt, &loss_fn, &opts).unwrap();
        assert!(t.loss.is_finite() && t.samples == 32, "{precision}: {t}");
        assert!(!before.equal(&vs.variables()["fc2.weight"]), "{precision}: the weights moved");
        let v = trainbook::train::evaluate(&net, &mut data, &loss_fn, &opts).unwrap();
        assert!(v.loss.is_finite(), "{precision}: {v}");
    }
}

/// A small float16 network: a convolution and a linear layer under autocast.
fn f16_net(vs: &VarStore) -> tch::nn::SequentialT {
    use tch::nn::{conv2d, linear, seq_t};
    let root = vs.root();
    seq_t()
        .add(conv2d(&root / "conv", 1, 4, 3, Default::default()))
        .add_fn(|x| x.relu().flatten(1, -1))
        .add(linear(&root / "fc", 4 * 6 * 6, 10, Default::default()))
}

/// GradScaler with SGD (both kernels, momentum, Nesterov, weight decay) on float16 autocast
/// steps, against the same SGD stepping on the unscaled gradients without a scaler: a step
/// whose gradients hold an inf leaves the parameters, the momentum buffers and the step counts
/// as they were (as torch's skipped step), a finite one equals the plain step bit for bit, and
/// once the momentum buffers exist no step reads the device.
#[test]
fn grad_scaler_skips_sgd_steps_on_the_device_without_reading_it() {
    let _turn = common::module_turn(module_path!());
    let _serial = serial();
    let kind =
        OptimizerKind::Sgd { momentum: 0.9, dampening: 0.0, nesterov: true, weight_decay: 1e-3 };
    let inf_steps = [0, 3];
    for kernels in [Kernels::MultiTensor, Kernels::PerTensor] {
        let (a, mut b) = (VarStore::new(Device::Cpu), VarStore::new(Device::Cpu));
        let (net_a, net_b) = (f16_net(&a), f16_net(&b));
        b.copy(&a).unwrap();
        let mut opt_a = Optimizer::new(&a, kind, 0.05).with_kernels(kernels);
        let mut opt_b = Optimizer::new(&b, kind, 0.05).with_kernels(kernels);
        let config = GradScalerConfig { init_scale: 256.0, ..Default::default() };
        let mut scaler = GradScaler::with_config(Device::Cpu, config);
        let loss_fn = CrossEntropyLoss::new();
        for step in 0..5 {
            let x = Tensor::randn([4, 1, 8, 8], (Kind::Float, Device::Cpu));
            let y = Tensor::from_slice(&[1i64, 3, 5, 7]);
            opt_a.zero_grad();
            opt_b.zero_grad();
            let loss = Precision::F16
                .run(Device::Cpu, || loss_fn.mean(&net_a.forward_t(&x, true), &y))
                .unwrap();
            scaler.scale(&loss).backward();
            net_b.forward_t(&x, true).sum(Kind::Float).backward(); // defines b's gradients
            let skipped = inf_steps.contains(&step);
            if skipped {
                let _ = a.variables()["fc.bias"].grad().get(2).fill_(f64::INFINITY);
            }
            let (state_before, _) = opt_a.state_dict();
            let params_before: Vec<Tensor> =
                a.trainable_variables().iter().map(Tensor::copy).collect();
            let reads = host_reads();
            let found_inf = scaler.step(&mut opt_a).unwrap();
            let reads = host_reads() - reads;
            assert_eq!(found_inf.double_value(&[]), if skipped { 1.0 } else { 0.0 }, "step {step}");
            // The buffers exist after the first step taken (step 1): from step 2 on, no read.
            assert_eq!(reads, u64::from(step <= 1), "{kernels:?} step {step}: reads of the device");
            if skipped {
                let (state_after, _) = opt_a.state_dict();
                assert_eq!(state_after.len(), state_before.len(), "{kernels:?} step {step}");
                for ((n, after), (_, before)) in state_after.iter().zip(&state_before) {
                    assert!(after.equal(before), "{kernels:?} step {step}: {n} changed");
                }
                for (after, before) in a.trainable_variables().iter().zip(&params_before) {
                    assert!(after.equal(before), "{kernels:?} step {step}: a parameter changed");
                }
            } else {
                // The reference: the same update on the gradients GradScaler unscaled in place.
                for (name, g) in a.variables().iter().map(|(n, p)| (n.clone(), p.grad())) {
                    b.variables()[&name].grad().copy_(&g);
                }
                opt_b.step().unwrap();
            }
            for (name, p) in a.variables() {
                assert!(p.equal(&b.variables()[&name]), "{kernels:?} step {step}: {name}");
            }
            let ((ta, ma), (tb, mb)) = (opt_a.state_dict(), opt_b.state_dict());
            assert_eq!(ma.steps, mb.steps, "{kernels:?} step {step}: step counts");
            assert_eq!(ta.len(), tb.len());
            for ((n, x), (_, y)) in ta.iter().zip(&tb) {
                assert!(x.equal(y), "{kernels:?} step {step}: {n} differs from the plain step");
            }
        }
        assert_eq!(scaler.current_scale(), 64.0, "halved at each skipped step");
    }
}

/// Adam and AdamW under `GradScaler`: the multi-tensor (fused) kernel unscales and skips on the
/// device and never reads it; the per-tensor update reads the inf flag once per step (torch's
/// `GradScaler` does the same for every non-fused optimizer). A step with an inf gradient changes
/// no parameter either way.
#[test]
fn grad_scaler_reads_the_device_once_per_step_only_for_per_tensor_adam() {
    let _turn = common::module_turn(module_path!());
    let _serial = serial();
    for kind in [OptimizerKind::adam(), OptimizerKind::adamw()] {
        for (kernels, per_step) in [(Kernels::MultiTensor, 0), (Kernels::PerTensor, 1)] {
            let vs = VarStore::new(Device::Cpu);
            let net = f16_net(&vs);
            let mut opt = Optimizer::new(&vs, kind, 1e-3).with_kernels(kernels);
            let config = GradScalerConfig { init_scale: 256.0, ..Default::default() };
            let mut scaler = GradScaler::with_config(Device::Cpu, config);
            for step in 0..4 {
                let x = Tensor::randn([4, 1, 8, 8], (Kind::Float, Device::Cpu));
                let y = Tensor::from_slice(&[1i64, 3, 5, 7]);
                opt.zero_grad();
                let loss = CrossEntropyLoss::new().mean(&net.forward_t(&x, true), &y);
                scaler.scale(&loss).backward();
                let skipped = step == 2;
                if skipped {
                    let _ = vs.variables()["fc.bias"].grad().get(2).fill_(f64::INFINITY);
                }
                let before: Vec<Tensor> =
                    vs.trainable_variables().iter().map(Tensor::copy).collect();
                let reads = host_reads();
                let found_inf = scaler.step(&mut opt).unwrap();
                let reads = host_reads() - reads;
                let what = format!("{kind:?} {kernels:?} step {step}");
                assert_eq!(reads, per_step, "{what}: reads of the device");
                assert_eq!(found_inf.double_value(&[]), if skipped { 1.0 } else { 0.0 }, "{what}");
                let unchanged =
                    vs.trainable_variables().iter().zip(&before).all(|(p, b)| p.equal(b));
                assert_eq!(
                    unchanged, skipped,
                    "{what}: the parameters moved only on a finite step"
                );
            }
        }
    }
}
