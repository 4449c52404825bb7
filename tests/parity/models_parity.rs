//! Models, optimizers and schedules against PyTorch (the venv's torch/torchvision as oracle):
//! ResNet34 with the course head loads torchvision weights and gives the same eval output,
//! saves weights PyTorch loads strictly, optimizers match torch.optim step for step (single-tensor
//! and foreach/fused alike), LR
//! schedules match torch's sequences, and freezing really freezes.
use crate::common;

use std::path::Path;
use std::process::Command;

use tch::nn::{ModuleT, VarStore};
use tch::{Device, Kind, Tensor};
use trainbook::models::{
    freeze_backbone, from_safetensors_bytes, load_safetensors, load_state_dict,
    resnet34_classifier, save_safetensors, to_safetensors_bytes, MnistNet,
};
use trainbook::train::{
    CosineAnnealingLR, CrossEntropyLoss, Kernels, Mode, Optimizer, OptimizerKind,
    ReduceLROnPlateau, StepLR,
};

fn tmp_dir(name: &str) -> common::WorkDir {
    common::WorkDir::new(name)
}

fn oracle(args: &[&str]) -> String {
    let out = Command::new(common::venv_bin("python"))
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oracle/models.py"))
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "oracle {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn read(path: &Path) -> Vec<(String, Tensor)> {
    from_safetensors_bytes(&std::fs::read(path).unwrap(), path).unwrap()
}

fn get<'a>(ts: &'a [(String, Tensor)], name: &str) -> &'a Tensor {
    &ts.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no {name}")).1
}

fn max_abs(a: &Tensor, b: &Tensor) -> f64 {
    (a - b).abs().max().double_value(&[])
}

#[test]
fn resnet34_matches_torchvision_and_round_trips() {
    let _turn = common::module_turn(module_path!());
    tch::set_num_threads(2);
    let dir = tmp_dir("resnet");
    oracle(&["resnet", dir.to_str().unwrap()]);
    let mut vs = VarStore::new(Device::Cpu);
    let net = resnet34_classifier(&vs.root(), 3);
    let report = load_safetensors(&mut vs, &dir.join("resnet.safetensors"), true).unwrap();
    assert_eq!(report.loaded.len(), vs.variables().len());
    let io = read(&dir.join("io.safetensors"));
    let y = tch::no_grad(|| net.forward_t(get(&io, "x"), false));
    let diff = max_abs(&y, get(&io, "y"));
    println!("resnet34 eval output vs torchvision: max |diff| {diff:e}");
    assert!(diff <= 1e-4, "max |diff| {diff}");

    // trainbook saves; PyTorch loads it with strict=True and gets the same output.
    save_safetensors(&vs, &dir.join("saved.safetensors")).unwrap();
    std::fs::write(
        dir.join("rust_out.safetensors"),
        to_safetensors_bytes(&[("y".into(), y)], None).unwrap(),
    )
    .unwrap();
    let torch_diff: f64 =
        oracle(&["load", dir.to_str().unwrap(), dir.join("saved.safetensors").to_str().unwrap()])
            .trim()
            .parse()
            .unwrap();
    assert!(torch_diff <= 1e-5, "PyTorch output from trainbook's weights differs by {torch_diff}");

    // A torchvision-headed model (fc = Linear(512, 1000)) loads the backbone non-strictly and
    // reports the head; strict loading refuses and names the keys.
    let mut other = VarStore::new(Device::Cpu);
    let _ = trainbook::models::resnet34(&other.root(), 1000, trainbook::models::HeadKind::Linear);
    let file = dir.join("resnet.safetensors");
    let report = load_safetensors(&mut other, &file, false).unwrap();
    assert_eq!(report.missing, vec!["fc.bias".to_string(), "fc.weight".to_string()]);
    let mut unexpected = report.unexpected.clone();
    unexpected.sort();
    assert_eq!(unexpected, vec!["fc.0.bias", "fc.0.weight", "fc.2.bias", "fc.2.weight"]);
    let err = load_safetensors(&mut other, &file, true).unwrap_err().to_string();
    assert!(
        err.contains("missing") && err.contains("fc.weight") && err.contains("fc.0.weight"),
        "{err}"
    );
    // A different number of classes is a shape mismatch that lists the tensors.
    let mut five = VarStore::new(Device::Cpu);
    let _ = resnet34_classifier(&five.root(), 5);
    let err = load_safetensors(&mut five, &file, false).unwrap_err().to_string();
    assert!(
        err.contains("mismatch for 2 tensor(s)")
            && err.contains("fc.2.weight: file [3, 512], model [5, 512]")
            && err.contains("resnet.safetensors"),
        "{err}"
    );
}

#[test]
fn optimizers_match_torch_optim() {
    let _turn = common::module_turn(module_path!());
    let dir = tmp_dir("optim");
    oracle(&["optim", dir.to_str().unwrap()]);
    let ts = read(&dir.join("optim.safetensors"));
    let init: Vec<(String, Tensor)> = ts
        .iter()
        .filter_map(|(n, t)| n.strip_prefix("init.").map(|k| (k.to_string(), t.shallow_clone())))
        .collect();
    let (x, y) = (get(&ts, "x"), get(&ts, "y"));
    let loss_fn = CrossEntropyLoss::new().label_smoothing(0.1);
    let kinds = [
        (
            "sgd",
            OptimizerKind::Sgd {
                momentum: 0.9,
                dampening: 0.0,
                nesterov: true,
                weight_decay: 1e-3,
            },
            0.05,
        ),
        (
            "adam",
            OptimizerKind::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 1e-3 },
            1e-3,
        ),
        ("adamw", OptimizerKind::adamw(), 1e-3),
    ];
    let variants = kinds.iter().flat_map(|&(name, kind, lr)| {
        [
            (format!("{name}.single"), kind, lr, Kernels::PerTensor),
            (format!("{name}.multi"), kind, lr, Kernels::MultiTensor),
        ]
    });
    for (name, kind, lr, kernels) in variants {
        let mut vs = VarStore::new(Device::Cpu);
        let net = MnistNet::new(&vs.root());
        load_state_dict(&mut vs, &init, true).unwrap();
        let mut opt = Optimizer::new(&vs, kind, lr).with_kernels(kernels);
        let mut losses = Vec::new();
        for step in 0..5 {
            if step == 3 {
                // Export and restore the state mid-way: the trajectory must not change.
                let (tensors, meta) = opt.state_dict();
                let mut fresh = Optimizer::new(&vs, kind, lr).with_kernels(kernels);
                fresh.load_state_dict(&tensors, &meta).unwrap();
                opt = fresh;
            }
            opt.zero_grad();
            let loss = loss_fn.mean(&net.forward_t(x, false), y);
            loss.backward();
            opt.step().unwrap();
            losses.push(loss.double_value(&[]));
        }
        let want_losses: Vec<f64> = Vec::try_from(get(&ts, &format!("{name}.losses"))).unwrap();
        for (a, b) in losses.iter().zip(&want_losses) {
            assert!((a - b).abs() <= 1e-5 * b.abs().max(1.0), "{name}: loss {a} vs torch {b}");
        }
        for (pname, p) in vs.variables() {
            let want = get(&ts, &format!("{name}.{pname}"));
            let rel = max_abs(&p, want) / want.abs().max().double_value(&[]).max(1e-12);
            assert!(rel <= 1e-5, "{name} {pname}: relative difference {rel}");
        }
    }
}

#[test]
fn schedules_match_torch() {
    let _turn = common::module_turn(module_path!());
    let want: serde_json::Value = serde_json::from_str(&oracle(&["schedules"])).unwrap();
    let seq = |k: &str| -> Vec<f64> {
        want[k].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect()
    };
    let metrics =
        [1.0, 0.9, 0.95, 0.95, 0.95, 0.89, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.88, 0.88, 0.88, 0.88];
    for (mode, sign, key) in [(Mode::Min, 1.0, "plateau_min"), (Mode::Max, -1.0, "plateau_max")] {
        let mut s = ReduceLROnPlateau::new(mode).factor(0.5).patience(2).cooldown(1).min_lr(0.01);
        let mut lr = 0.1;
        let got: Vec<f64> = metrics
            .iter()
            .map(|m| {
                lr = s.step(sign * m, lr);
                lr
            })
            .collect();
        assert_eq!(got, seq(key), "{key}");
    }
    let mut s = StepLR::new(3, 0.5);
    let mut lr = 0.1;
    let got: Vec<f64> = (0..10)
        .map(|_| {
            lr = s.step(lr);
            lr
        })
        .collect();
    assert_eq!(got, seq("step"));
    let mut s = CosineAnnealingLR::new(0.1, 4, 0.001);
    let mut lr = 0.1;
    let got: Vec<f64> = (0..12)
        .map(|_| {
            lr = s.step(lr);
            lr
        })
        .collect();
    for (a, b) in got.iter().zip(seq("cosine")) {
        assert!((a - b).abs() < 1e-12, "cosine {got:?}");
    }
}

#[test]
fn freezing_the_backbone_trains_only_the_head() {
    let _turn = common::module_turn(module_path!());
    let vs = VarStore::new(Device::Cpu);
    let net = resnet34_classifier(&vs.root(), 3);
    freeze_backbone(&vs, true);
    let before: Vec<(String, Tensor)> =
        vs.variables().into_iter().map(|(n, t)| (n, t.copy())).collect();
    let mut opt = Optimizer::adam(&vs, 1e-2);
    let x = Tensor::randn([2, 3, 64, 64], (Kind::Float, Device::Cpu));
    let loss =
        CrossEntropyLoss::new().mean(&net.forward_t(&x, false), &Tensor::from_slice(&[0i64, 2]));
    opt.zero_grad();
    loss.backward();
    opt.step().unwrap();
    for (name, old) in &before {
        let now = &vs.variables()[name];
        let changed = max_abs(now, old) > 0.0;
        assert_eq!(changed, name.starts_with("fc."), "{name} changed={changed}");
    }
    freeze_backbone(&vs, false);
    assert!(vs.variables()["layer1.0.conv1.weight"].requires_grad());
    assert!(!vs.variables()["bn1.running_mean"].requires_grad());
}

#[test]
fn weights_script_exports_torchvision_names() {
    let _turn = common::module_turn(module_path!());
    let dir = tmp_dir("weights");
    let file = dir.join("r34.safetensors");
    let out = Command::new(common::venv_bin("python"))
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/data-scripts/resnet34_weights.py"))
        .arg(&file)
        .arg("--random-init")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut vs = VarStore::new(Device::Cpu);
    let _ = resnet34_classifier(&vs.root(), 3);
    let report = load_safetensors(&mut vs, &file, false).unwrap();
    let mut missing = report.missing.clone();
    missing.sort();
    assert_eq!(missing, vec!["fc.0.bias", "fc.0.weight", "fc.2.bias", "fc.2.weight"]);
    assert_eq!(report.unexpected.len(), 2, "{:?}", report.unexpected);
    assert_eq!(report.loaded.len(), vs.variables().len() - 4);
}
