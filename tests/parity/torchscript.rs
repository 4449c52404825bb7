//! Models defined in PyTorch and trained by trainbook, and trainbook models run by PyTorch,
//! through TorchScript (tests/oracle/torchscript.py is PyTorch's side):
//! - a small CNN with BatchNorm, scripted and saved by PyTorch, loaded with `ScriptModule::load`
//!   and trained by `fit` for 2 epochs (SGD with momentum) ends with the parameters and
//!   BatchNorm buffers that PyTorch's own training of the saved module reaches, bit for bit;
//! - the same training in bf16 autocast (`Precision::Bf16`; PyTorch's side inside
//!   `torch.autocast("cpu", dtype=torch.bfloat16)`) ends with PyTorch's values, bit for bit;
//! - the same run stopped after its first epoch and resumed by a second `fit` (a fresh load of
//!   the module, the checkpoint restored into its tensors) ends on the same values, and
//!   `ScriptModule::save` writes them so that a new load holds them;
//! - the same module trained by `fit` on 2 Gloo ranks (DDP over its parameters; this binary
//!   started twice) ends with the same parameters on both ranks, moved from the start: the
//!   gradients of the module's tensors went through DDP's all-reduce;
//! - a trainbook ResNet18 exported with `export_traced` gives, in PyTorch's `torch.jit.load`,
//!   the outputs trainbook computes, bit for bit, and holds its weights and BatchNorm
//!   statistics as named parameters and buffers;
//! - a file that is not a TorchScript module, a forward with the wrong input, and a second load
//!   into the same names are errors naming what failed.
use crate::common;

use std::process::Command;

use tch::nn::{ModuleT, VarStore};
use tch::{Device, Kind, Tensor};
use trainbook::data::{DataLoader, TensorDataset};
use trainbook::dist::Dist;
use trainbook::fit::Trainer;
use trainbook::models::{export_traced, resnet18, HeadKind, ScriptModule};
use trainbook::train::{Optimizer, Precision};

/// The store's variables (parameters and buffers) by name, sorted.
fn variables(vs: &VarStore) -> Vec<(String, Tensor)> {
    let mut v: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// Trains the scripted module of `dir` with `fit` into `out` for `epochs` (resuming from `out`
/// if it has a checkpoint) and returns its variables.
fn fit_script(dir: &std::path::Path, out: &std::path::Path, epochs: u64) -> Vec<(String, Tensor)> {
    fit_script_on(&Dist::single(Device::Cpu), dir, out, (epochs, Precision::F32))
}

/// [`fit_script`] as a rank of `dist` (each rank's share of the batches).
fn fit_script_on(
    dist: &Dist,
    dir: &std::path::Path,
    out: &std::path::Path,
    (epochs, precision): (u64, Precision),
) -> Vec<(String, Tensor)> {
    let data = Tensor::read_safetensors(dir.join("make.safetensors")).unwrap();
    let (images, labels) = (common::get(&data, "images"), common::get(&data, "labels"));
    let classes = vec!["a".to_string(), "b".to_string(), "c".to_string()];
    let ds = std::sync::Arc::new(TensorDataset::new(images, labels, classes).unwrap());
    let mut train = DataLoader::from_arc(ds.clone(), 8).distributed(dist);
    let mut val = DataLoader::from_arc(ds, 20).distributed(dist);
    let mut vs = VarStore::new(Device::Cpu);
    let net = ScriptModule::load(dir.join("model.pt"), &vs.root()).unwrap();
    let mut opt = Optimizer::sgd(&vs, 0.05, 0.9);
    let trainer = Trainer::new(dist).epochs(epochs).out(out).progress(false).precision(precision);
    trainer.fit(&mut vs, &net, &mut opt, &mut train, &mut val).unwrap();
    variables(&vs)
}

#[test]
fn a_pytorch_model_trains_in_fit_as_pytorch_trains_it_and_resumes_exactly() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("torchscript");
    let made = common::oracle_tensors("torchscript.py", "make", &work);
    let theirs = common::with_prefix(&made, "trained.");
    // One thread, as PyTorch's side: the kernels split their work the same way (OpenMP's
    // thread count is this test thread's own).
    let threads = tch::get_num_threads();
    tch::set_num_threads(1);
    let ours = fit_script(&work, &work.join("whole"), 2);
    let names: Vec<&str> = ours.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.contains(&"bn1.running_mean") && names.contains(&"conv1.weight"), "{names:?}");
    assert_eq!(ours.len(), theirs.len(), "{names:?}");
    for (name, t) in &ours {
        assert!(t.equal(common::get(&theirs, name)), "{name}: trainbook's fit vs PyTorch");
    }
    // In bf16 autocast: the same graph, the same autocast rules in the same libtorch.
    let dist = Dist::single(Device::Cpu);
    let bf16 = fit_script_on(&dist, &work, &work.join("bf16"), (2, Precision::Bf16));
    let theirs_bf16 = common::with_prefix(&made, "trained_bf16.");
    assert_eq!(bf16.len(), theirs_bf16.len());
    for (name, t) in &bf16 {
        let (f32_weight, theirs) = (common::get(&ours, name), common::get(&theirs_bf16, name));
        assert!(
            !t.equal(f32_weight) || name.ends_with("num_batches_tracked"),
            "{name}: bf16 changed nothing"
        );
        assert!(t.equal(theirs), "{name}: trainbook's fit vs PyTorch, bf16 autocast");
    }

    // One epoch, then a second fit that resumes into a freshly loaded module.
    let resumed_out = work.join("resumed");
    fit_script(&work, &resumed_out, 1);
    let resumed = fit_script(&work, &resumed_out, 2);
    for ((name, a), (_, b)) in ours.iter().zip(&resumed) {
        assert!(a.equal(b), "{name}: resumed vs uninterrupted");
    }

    // Saved with the trained values, loaded again.
    let vs = VarStore::new(Device::Cpu);
    let net = ScriptModule::load(work.join("model.pt"), &vs.root()).unwrap();
    tch::no_grad(|| {
        for (name, t) in variables(&vs) {
            t.shallow_clone().copy_(common::get(&ours, &name));
        }
    });
    net.save(work.join("trained.pt")).unwrap();
    let again = VarStore::new(Device::Cpu);
    let _loaded = ScriptModule::load(work.join("trained.pt"), &again.root()).unwrap();
    for (name, t) in variables(&again) {
        assert!(t.equal(common::get(&ours, &name)), "{name}: saved and loaded again");
    }
    // A second load into a store that has its names already is an error naming one.
    let err = ScriptModule::load(work.join("model.pt"), &vs.root()).unwrap_err().to_string();
    assert!(err.contains("already has a variable"), "{err}");
    tch::set_num_threads(threads);
}

#[test]
fn a_trainbook_model_exported_as_torchscript_runs_in_pytorch_to_the_same_outputs() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("torchscript_export");
    tch::set_num_threads(1); // as PyTorch's side (this test's thread only: OpenMP's setting)
    let vs = VarStore::new(Device::Cpu);
    let net = resnet18(&vs.root(), 10, HeadKind::Linear);
    // Random running statistics, so that the evaluation-mode pass depends on the buffers.
    tch::no_grad(|| {
        for (name, t) in vs.variables() {
            if name.ends_with("running_var") {
                let _ = t.shallow_clone().uniform_(0.5, 1.5);
            }
        }
    });
    let x = Tensor::randn([2, 3, 64, 64], (Kind::Float, Device::Cpu));
    export_traced(&vs, &net, &x, work.join("traced.pt")).unwrap();
    Tensor::write_safetensors(&[("input", &x)], work.join("export_input.safetensors")).unwrap();
    let out = Command::new(common::venv_bin("python"))
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/torchscript.py"))
        .args(["export", work.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::text(&out));
    let theirs = Tensor::read_safetensors(work.join("export.safetensors")).unwrap();
    let ours = tch::no_grad(|| net.forward_t(&x, false));
    assert!(ours.equal(common::get(&theirs, "output")), "PyTorch's run of the exported model");
    let mut names: Vec<String> =
        String::from_utf8(out.stdout).unwrap().lines().map(String::from).collect();
    let mut want: Vec<String> = vs.variables().into_keys().collect();
    names.sort();
    want.sort();
    assert_eq!(names, want, "the exported module's parameters and buffers");
}

#[test]
#[ignore = "a rank of the DDP test, started by it"]
fn rank_worker() {
    let _turn = common::module_turn(module_path!());
    let work = std::path::PathBuf::from(std::env::var("TB_OUT").unwrap());
    assert_eq!(std::env::var("TB_SCENARIO").as_deref(), Ok("ddp"));
    let dist = Dist::init().unwrap();
    let vars = fit_script_on(&dist, &work, &work.join("ddp"), (1, Precision::F32));
    let named: Vec<(&str, &Tensor)> = vars.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let file = work.join(format!("rank{}.safetensors", dist.rank()));
    Tensor::write_safetensors(&named, file).unwrap();
    dist.destroy().unwrap();
}

#[test]
fn a_pytorch_model_trains_under_ddp_with_the_replicas_in_step() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("torchscript_ddp");
    let _ = common::oracle_tensors("torchscript.py", "make", &work);
    common::ranks::run_ranks(module_path!(), "ddp", 2, &work);
    let (a, b) = (
        common::sorted_tensors(&work.join("rank0.safetensors")),
        common::sorted_tensors(&work.join("rank1.safetensors")),
    );
    let start = VarStore::new(Device::Cpu);
    let _net = ScriptModule::load(work.join("model.pt"), &start.root()).unwrap();
    let params = start.trainable_variables().len();
    let initial = start.variables();
    let mut compared = 0;
    for ((name, x), (_, y)) in a.iter().zip(&b) {
        if initial[name].requires_grad() {
            assert!(x.equal(y), "{name}: rank 0 vs rank 1");
            assert!(!x.equal(&initial[name]), "{name} did not train");
            compared += 1;
        }
    }
    assert_eq!(compared, params);
}

#[test]
fn what_is_not_a_module_and_a_wrong_input_are_errors_naming_them() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("torchscript_errors");
    let bogus = work.join("not_a_module.pt");
    std::fs::write(&bogus, b"not a zip file").unwrap();
    let vs = VarStore::new(Device::Cpu);
    let err = ScriptModule::load(&bogus, &vs.root()).unwrap_err().to_string();
    assert!(err.contains("torch.jit.load") && err.contains("not_a_module.pt"), "{err}");

    // The PyTorch-made module given a picture with another number of channels.
    let work_make = common::WorkDir::new("torchscript_errors_make");
    let _ = common::oracle_tensors("torchscript.py", "make", &work_make);
    let other = VarStore::new(Device::Cpu);
    let traced = ScriptModule::load(work_make.join("model.pt"), &other.root()).unwrap();
    let wrong = Tensor::zeros([1, 1, 8, 8], (Kind::Float, Device::Cpu));
    let err = traced.forward_all(&[&wrong], false).unwrap_err().to_string();
    assert!(err.contains("TorchScript forward"), "{err}");
}
