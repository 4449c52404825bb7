//! The weight trail (`Trainer::weight_trail`, `trainbook-diff`): two runs whose schedules differ
//! only in the rate set after step K are reported equal up to step K-1, with the optimizer's
//! state (its rate) differing at step K and the weights from step K+1, with the first tensor and
//! the config that differ; a run stopped after its first epoch
//! and resumed leaves the same trail as the uninterrupted run, step for step.
use crate::common;

use std::path::Path;
use std::process::Command;

use tch::nn::VarStore;
use tch::Device;
use trainbook::dist::Dist;
use trainbook::fit::Trainer;
use trainbook::models::MnistNet;
use trainbook::trail::{compare, read_trail};
use trainbook::train::{Cadence, Optimizer, StepLR};

/// libtorch's random generator is shared by the test threads: one run at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

const SAMPLES: usize = 40; // 10 steps of 4 per epoch
const K: u64 = 7; // the learning rate changes after this many steps

/// `epochs` of the MNIST CNN with SGD and a per-step StepLR(K, gamma): with gamma 1 the rate
/// never changes, with another gamma it changes after step K.
fn run(out: &Path, gamma: f64, epochs: u64) {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dist = Dist::single(Device::Cpu);
    tch::manual_seed(3);
    let mut vs = VarStore::new(Device::Cpu);
    let net = MnistNet::new(&vs.root());
    let mut opt = Optimizer::sgd(&vs, 0.05, 0.9);
    let (mut train, mut val) =
        (common::random_mnist_loader(1, SAMPLES), common::random_mnist_loader(2, 8));
    Trainer::new(&dist)
        .epochs(epochs)
        .out(out)
        .progress(false)
        .step_log(false)
        .schedule(StepLR::new(K, gamma).stepping(Cadence::Step))
        .record_config(serde_json::json!({ "gamma": gamma }))
        .weight_trail(1)
        .fit(&mut vs, &net, &mut opt, &mut train, &mut val)
        .unwrap();
}

fn diff(a: &Path, b: &Path) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_trainbook-diff")).arg(a).arg(b).output().unwrap();
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code(), text)
}

#[test]
fn a_changed_learning_rate_is_found_at_its_first_step_and_a_resumed_run_leaves_the_same_trail() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("weight-trail");
    let (same, changed, resumed) = (work.join("same"), work.join("changed"), work.join("resumed"));
    run(&same, 1.0, 2);
    run(&changed, 0.5, 2);
    run(&resumed, 1.0, 1);
    run(&resumed, 1.0, 2); // resumed from its checkpoint after epoch 1

    let (a, b) = (read_trail(&same).unwrap(), read_trail(&changed).unwrap());
    assert_eq!(a.steps.iter().map(|s| s.step).collect::<Vec<_>>(), (1..=20).collect::<Vec<_>>());
    let found = compare(&a, &b);
    // The schedule sets the new rate right after step K: from there the optimizer's state (its
    // rate) differs; the weights differ from step K+1, the first step taken with that rate.
    assert_eq!(found.last_equal_step, Some(K - 1), "{found}");
    let first = found.first_difference.clone().unwrap();
    assert_eq!((first.step, first.epoch, first.batches_done), (K, 0, K), "{found}");
    assert!(!first.weights_differ && first.optimizer_differs, "{found}");
    assert_eq!(first.first_tensor, None, "{found}");
    let weights = found.first_weights_difference.clone().unwrap();
    assert_eq!(weights.step, K + 1, "{found}");
    assert_eq!(weights.first_tensor.as_deref(), Some("conv1.bias"), "the first in name order");
    let fields: Vec<&str> = found.header_differences.iter().map(|d| d.field.as_str()).collect();
    assert_eq!(fields, ["config"], "{found}");

    let (code, text) = diff(&same, &changed);
    assert_eq!(code, Some(1), "{text}");
    let at_k = format!("first difference at step {K} (epoch 1, {K} batches done): the optimizer");
    assert!(text.contains(&at_k), "{text}");
    let weights_at = format!("the weights first differ at step {}; first tensor conv1.bias", K + 1);
    assert!(text.contains(&weights_at), "{text}");
    assert!(text.contains(&format!("last step recorded equal: {}", K - 1)), "{text}");
    assert!(text.contains("header: config differs"), "{text}");

    // The resumed run wrote its first epoch's steps, then the second epoch's after its resume.
    let r = read_trail(&resumed).unwrap();
    assert_eq!((r.headers.len(), r.steps.len()), (1, 20));
    let (code, text) = diff(&same, &resumed);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("all 20 steps recorded by both runs are equal"), "{text}");

    let (code, text) = diff(&same, &work.join("nowhere"));
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("nowhere"), "{text}");
}
