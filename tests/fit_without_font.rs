//! A run whose figures cannot be drawn (no font: a cluster node without fonts-dejavu-core, no
//! root to install it) still ends well and keeps what it trained: `model.safetensors` and
//! `metrics.jsonl` are written, the figures are skipped with a warning (on the GPU machine the
//! examples used to fail after training, before the weights were saved). Its own test binary:
//! the font is looked up once per process.
mod common;

use tch::nn::VarStore;
use tch::Device;
use trainbook::dist::Dist;
use trainbook::fit::Trainer;
use trainbook::train::Optimizer;

#[test]
fn a_run_without_a_font_saves_its_weights_and_skips_the_figures() {
    let work = common::WorkDir::new("fit-no-font");
    let not_a_font = work.join("missing.ttf");
    std::env::set_var("TRAINBOOK_FONT", &not_a_font);
    let dist = Dist::single(Device::Cpu);
    tch::manual_seed(3);
    let mut vs = VarStore::new(Device::Cpu);
    let net = common::linear_classifier(&vs);
    let mut opt = Optimizer::sgd(&vs, 0.05, 0.9);
    let (mut train, mut val) =
        (common::three_class_loader(1, 16), common::three_class_loader(2, 16));
    let out = work.join("run");
    let report = Trainer::new(&dist)
        .epochs(1)
        .out(&out)
        .resume(false)
        .progress(false)
        .fit(&mut vs, &net, &mut opt, &mut train, &mut val)
        .expect("the run ends well without a font");
    assert_eq!(report.history.len(), 1);
    assert!(out.join("model.safetensors").is_file(), "the weights are saved");
    assert!(out.join("metrics.jsonl").is_file(), "the metrics are saved");
    assert!(!out.join("curves.png").exists(), "no figure without a font");
    // The weights on disk are the model's.
    let saved = common::sorted_tensors(&out.join("model.safetensors"));
    for (name, t) in vs.variables() {
        let (_, s) = saved.iter().find(|(n, _)| *n == name).expect(&name);
        assert!(s.equal(&t), "{name}");
    }
}
