//! A model defined in PyTorch, trained on the GPU: the small CNN of tests/oracle/torchscript.py,
//! scripted and saved by PyTorch, loaded onto the GPU with `ScriptModule::load` and trained by
//! `fit` for 2 epochs, in float32 and in bf16 autocast, against PyTorch's own training of the
//! saved module on the same GPU (both sides in the deterministic mode). Each parameter and
//! BatchNorm buffer ends within a share of the distance it moved (1e-4 in float32, 2^-7 in
//! bf16: one flipped bf16 rounding), the step counter equal; the probe prints whether every
//! tensor was equal bit for bit (the CPU test, tests/parity/torchscript.rs, asserts that).
use std::path::Path;
use std::sync::Arc;

use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};
use trainbook::data::{DataLoader, TensorDataset};
use trainbook::dist::Dist;
use trainbook::fit::Trainer;
use trainbook::models::ScriptModule;
use trainbook::train::{Optimizer, Precision};

use crate::common;
use crate::common::gpu::{gpu, oracle};

#[test]
fn a_pytorch_module_trains_on_the_gpu_as_pytorch_trains_it() {
    let Some(_) = gpu("a_pytorch_module_trains_on_the_gpu_as_pytorch_trains_it") else { return };
    crate::run_probe("torchscript::torchscript_probe");
}

/// The store's variables (parameters and buffers) by name, sorted, on the CPU.
fn variables(vs: &VarStore) -> Vec<(String, Tensor)> {
    let mut v: Vec<(String, Tensor)> =
        vs.variables().into_iter().map(|(n, t)| (n, t.to_device(Device::Cpu))).collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// The scripted module of `dir` loaded onto `device` and trained by `fit` into `out` for 2
/// epochs (batches of 8 in order, SGD 0.05 with momentum 0.9, validation in batches of 20), as
/// the oracle trains it; its variables.
fn fit_script(
    device: Device,
    dir: &Path,
    out: &Path,
    precision: Precision,
) -> Vec<(String, Tensor)> {
    let data = Tensor::read_safetensors(dir.join("make.safetensors")).unwrap();
    let (images, labels) = (common::get(&data, "images"), common::get(&data, "labels"));
    let classes = vec!["a".to_string(), "b".to_string(), "c".to_string()];
    let ds = Arc::new(TensorDataset::new(images, labels, classes).unwrap());
    let dist = Dist::single(device);
    let mut train = DataLoader::from_arc(ds.clone(), 8).distributed(&dist);
    let mut val = DataLoader::from_arc(ds, 20).distributed(&dist);
    let mut vs = VarStore::new(device);
    let net = ScriptModule::load(dir.join("model.pt"), &vs.root()).unwrap();
    let mut opt = Optimizer::sgd(&vs, 0.05, 0.9);
    let trainer = Trainer::new(&dist).epochs(2).out(out).progress(false).precision(precision);
    trainer.fit(&mut vs, &net, &mut opt, &mut train, &mut val).unwrap();
    variables(&vs)
}

#[test]
#[ignore = "run by a_pytorch_module_trains_on_the_gpu_as_pytorch_trains_it"]
fn torchscript_probe() {
    // Before any CUDA work: cuBLAS reads its workspace setting when it starts.
    trainbook::train::use_deterministic_algorithms(true).unwrap();
    let Some(device) = gpu("torchscript_probe") else { return };
    let dir = common::WorkDir::new("gpu-torchscript");
    oracle("torchscript.py", &["make", dir.to_str().unwrap(), "cuda"]);
    let made = Tensor::read_safetensors(dir.join("make.safetensors")).unwrap();
    let init = {
        let vs = VarStore::new(Device::Cpu);
        let _net = ScriptModule::load(dir.join("model.pt"), &vs.root()).unwrap();
        variables(&vs)
    };
    for (precision, prefix, tol) in
        [(Precision::F32, "trained.", 1e-4), (Precision::Bf16, "trained_bf16.", 1.0 / 128.0)]
    {
        let ours = fit_script(device, &dir, &dir.join(format!("{precision:?}")), precision);
        let theirs = common::with_prefix(&made, prefix);
        let names: Vec<&str> = ours.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(ours.len(), theirs.len(), "{precision:?}: {names:?}");
        let (mut bitwise, mut worst) = (true, 0.0f64);
        for (name, t) in &ours {
            let want = common::get(&theirs, name);
            bitwise &= t.equal(want);
            if t.kind() != Kind::Float {
                assert!(t.equal(want), "{precision:?} {name}: {t} vs PyTorch's {want}");
                continue;
            }
            let (diff, moved) =
                (common::max_abs(t, want), common::max_abs(want, common::get(&init, name)));
            assert!(moved > 0.0, "{precision:?} {name}: PyTorch's training left it as it was");
            assert!(
                diff <= tol * moved + 1e-6,
                "{precision:?} {name}: {diff:e} from PyTorch, moved {moved:e}"
            );
            worst = worst.max(diff / moved);
        }
        println!(
            "TorchScript on the GPU, {precision:?}: {} tensors, largest difference {worst:.2e} of \
             the distance moved, bit for bit: {bitwise}",
            ours.len()
        );
    }
}
