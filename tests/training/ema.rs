//! The EMA of the weights (`ModelEma`, `Trainer::ema`): the averages equal timm's `ModelEmaV2`
//! bit for bit over a short training (timm in the venv, `tests/oracle/ema.py`), and in `fit`
//! the average is validated beside the model, saved in checkpoints and as
//! `model_ema.safetensors` (with decay 0 the average is the model itself, exactly). With
//! torchvision's cadence (`ModelEma::torchvision`) the averages equal the classification
//! reference's `AveragedModel` bit for bit, and the count of updates survives a checkpoint.
use crate::common;

use tch::nn::VarStore;
use tch::Device;
use trainbook::checkpoint::{open_checkpoint, read_tensors_file, Policy, EMA_FILE};
use trainbook::data::{DataLoader, TensorDataset};
use trainbook::dist::Dist;
use trainbook::fit::Trainer;
use trainbook::train::{EmaCadence, ModelEma, Optimizer};
use trainbook::Stateful;

/// `ema.py CMD`'s tensors, and a VarStore with the torch module's names holding its values at
/// the start (`step0.`).
fn oracle_run(work: &common::WorkDir, cmd: &str) -> (Vec<(String, tch::Tensor)>, VarStore) {
    let dir = work.join("oracle");
    std::fs::create_dir_all(&dir).unwrap();
    let oracle = common::oracle_tensors("ema.py", cmd, &dir);
    let vs = VarStore::new(Device::Cpu);
    for (name, t) in common::with_prefix(&oracle, "step0.") {
        let (module, var) = name.rsplit_once('.').unwrap();
        let _ = (vs.root() / module).var_copy(var, &t);
    }
    (oracle, vs)
}

#[test]
fn the_average_equals_timms_model_ema_v2_bit_for_bit() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("ema-oracle");
    let (oracle, vs) = oracle_run(&work, "steps");
    let at = |prefix: &str| common::with_prefix(&oracle, prefix);
    let mut ema = ModelEma::new(&vs, 0.9).unwrap();
    let vars = vs.variables();
    for k in 1..=6 {
        // The model after optimizer step k, as torch trained it; then the update timm made.
        tch::no_grad(|| {
            for (name, t) in at(&format!("step{k}.")) {
                vars[&name].shallow_clone().copy_(&t);
            }
        });
        ema.update(&vs);
    }
    let expected = at("ema.");
    assert_eq!(expected.len(), ema.tensors().len());
    for (name, t) in &expected {
        let ours = &ema.tensors().iter().find(|(n, _)| n == name).unwrap().1;
        assert!(ours.equal(t), "{name}: max diff {}", common::max_abs(ours, t));
    }
}

#[test]
fn torchvisions_cadence_equals_its_averaged_model_bit_for_bit() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("ema-torchvision");
    let (oracle, vs) = oracle_run(&work, "torchvision");
    let at = |prefix: &str| common::with_prefix(&oracle, prefix);
    let cadence = EmaCadence { every_steps: 2, copy_epochs: 1 };
    let mut ema = ModelEma::torchvision(&vs, 0.8, cadence).unwrap();
    let vars = vs.variables();
    let mut k = 0;
    let mut resumed = None;
    for epoch in 0..2u64 {
        for i in 0..5u64 {
            k += 1;
            tch::no_grad(|| {
                for (name, t) in at(&format!("step{k}.")) {
                    vars[&name].shallow_clone().copy_(&t);
                }
            });
            ema.after_step(&vs, epoch, i);
            if (epoch, i) == (1, 0) {
                // A checkpoint here: after the first averaging update's copy, one update done.
                let state = Stateful::state_dict(&ema).unwrap();
                assert_eq!(state.value["n_averaged"], 1, "{}", state.value);
                let mut back = ModelEma::torchvision(&vs, 0.8, cadence).unwrap();
                back.load_state_dict(state).unwrap();
                resumed = Some(back);
            }
            if let Some(back) = &mut resumed {
                if (epoch, i) != (1, 0) {
                    back.after_step(&vs, epoch, i);
                }
            }
        }
    }
    let expected = at("ema.");
    assert_eq!(expected.len(), ema.tensors().len());
    for (name, t) in &expected {
        for (which, e) in [("run", &ema), ("resumed", resumed.as_ref().unwrap())] {
            let ours = &e.tensors().iter().find(|(n, _)| n == name).unwrap().1;
            assert!(ours.equal(t), "{which} {name}: max diff {}", common::max_abs(ours, t));
        }
    }
    // Another cadence would differ (the test can fail): timm's every-step average.
    let mut timm = ModelEma::new(&vs, 0.8).unwrap();
    timm.update(&vs);
    assert!(!timm.tensors()[0].1.equal(&ema.tensors()[0].1));
    let bad = ModelEma::torchvision(&vs, 0.5, EmaCadence { every_steps: 0, copy_epochs: 0 });
    assert!(bad.unwrap_err().to_string().contains("--model-ema-steps"));
}

fn loader(seed: i64) -> DataLoader<TensorDataset> {
    common::three_class_loader(seed, 16)
}

fn fit_with_ema(out: &std::path::Path, decay: f64) -> trainbook::fit::FitReport {
    let dist = Dist::single(Device::Cpu);
    tch::manual_seed(3);
    let mut vs = VarStore::new(Device::Cpu);
    let net = common::linear_classifier(&vs);
    let mut opt = Optimizer::sgd(&vs, 0.05, 0.9);
    let (mut train, mut val) = (loader(1), loader(2));
    let policy = Policy { every_epochs: Some(1), every_steps: None, keep_last: 1, best: None };
    Trainer::new(&dist)
        .epochs(2)
        .out(out)
        .resume(false)
        .progress(false)
        .step_log(false)
        .policy(policy)
        .ema(decay)
        .fit(&mut vs, &net, &mut opt, &mut train, &mut val)
        .unwrap()
}

#[test]
fn fit_validates_saves_and_checkpoints_the_average() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("ema-fit");
    // Decay 0: the average is the model (0 * e + 1 * m), so everything must agree exactly.
    let same = fit_with_ema(&work.join("decay0"), 0.0);
    for r in &same.history {
        assert_eq!((r.ema_val_loss, r.ema_val_acc), (r.val_loss, r.val_acc), "epoch {}", r.epoch);
    }
    let files = |dir: &std::path::Path| {
        (
            common::sorted_tensors(&dir.join("model.safetensors")),
            common::sorted_tensors(&dir.join("model_ema.safetensors")),
        )
    };
    let (model, average) = files(&work.join("decay0"));
    assert_eq!(common::max_abs_diff(&model, &average), 0.0);

    // Decay 0.5: a real average, validated on its own, in the checkpoint.
    let out = work.join("decay05");
    let report = fit_with_ema(&out, 0.5);
    let last = report.last().unwrap();
    assert!(last.ema_val_loss.is_some_and(|l| l != last.val_loss.unwrap()), "{last:?}");
    let (model, average) = files(&out);
    assert!(common::max_abs_diff(&model, &average) > 0.0);
    let ckpt = open_checkpoint(&out.join("checkpoints/step-000000008")).unwrap();
    let mut saved = read_tensors_file(&ckpt, EMA_FILE).unwrap().expect("ema.safetensors");
    saved.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(common::max_abs_diff(&saved, &average), 0.0, "the checkpoint holds the average");
    let records = std::fs::read_to_string(out.join("metrics.jsonl")).unwrap();
    assert!(records.contains("\"ema_val_acc\""), "{records}");
    assert!(ModelEma::new(&VarStore::new(Device::Cpu), 1.0).is_err());
}
