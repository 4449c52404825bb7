//! `GradientNoise`, optax's `add_noise` as a callback at the moment before each optimizer step
//! (`Callback::on_before_optimizer_step`):
//! - `fit` with it ends on the weights of a hand-written loop (forward, loss, backward, the noise
//!   added by its definition, the step) bit for bit;
//! - a run stopped after its first epoch and resumed ends on the uninterrupted run's weights bit
//!   for bit (the step count is the callback's checkpointed state);
//! - its schedule is `sqrt(eta / t^gamma)` and its draws a standard normal sample, the same for
//!   the same seed and step, other for another step.
use crate::common;

use std::sync::Mutex;

use tch::nn::{ModuleT, VarStore};
use tch::{Device, Reduction, Tensor};
use trainbook::checkpoint::Policy;
use trainbook::dist::Dist;
use trainbook::fit::{GradientNoise, Trainer};
use trainbook::train::Optimizer;

/// libtorch's random generator is shared by the test threads: one run at a time.
static SERIAL: Mutex<()> = Mutex::new(());

const ETA: f64 = 0.3;
const GAMMA: f64 = 0.55;
const SEED: u64 = 7;

/// The weights after `fit` with the noise, `epochs` epochs into `out` (resumed with `resume`).
fn fit(out: &std::path::Path, epochs: u64, resume: bool) -> Vec<(String, Tensor)> {
    let dist = Dist::single(Device::Cpu);
    tch::manual_seed(3);
    let mut vs = VarStore::new(Device::Cpu);
    let net = common::linear_classifier(&vs);
    let mut opt = Optimizer::sgd(&vs, 0.05, 0.9);
    let (mut train, mut val) =
        (common::three_class_loader(1, 16), common::three_class_loader(2, 8));
    let policy = Policy { every_epochs: Some(1), every_steps: None, keep_last: 2, best: None };
    Trainer::new(&dist)
        .epochs(epochs)
        .out(out)
        .resume(resume)
        .progress(false)
        .policy(policy)
        .callback(GradientNoise::new(ETA, GAMMA, SEED).unwrap())
        .fit(&mut vs, &net, &mut opt, &mut train, &mut val)
        .unwrap();
    sorted(&vs)
}

fn sorted(vs: &VarStore) -> Vec<(String, Tensor)> {
    let mut w: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    w.sort_by(|a, b| a.0.cmp(&b.0));
    w
}

fn assert_same(a: &[(String, Tensor)], b: &[(String, Tensor)], what: &str) {
    assert_eq!(a.len(), b.len());
    for ((na, ta), (nb, tb)) in a.iter().zip(b) {
        assert_eq!(na, nb);
        assert!(ta.equal(tb), "{what}: {na} differs");
    }
}

#[test]
fn fit_with_the_noise_equals_a_hand_written_loop_bit_for_bit() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new("gradient-noise-loop");
    let fitted = fit(&work.join("fit"), 2, false);

    // The same run by hand: optax's add_noise between backward and the step.
    tch::manual_seed(3);
    let vs = VarStore::new(Device::Cpu);
    let net = common::linear_classifier(&vs);
    let mut opt = Optimizer::sgd(&vs, 0.05, 0.9);
    let mut train = common::three_class_loader(1, 16);
    let draws = GradientNoise::new(ETA, GAMMA, SEED).unwrap();
    let mut t = 0u64;
    let mut plain = 0;
    for _epoch in 0..2 {
        for batch in train.iter() {
            let batch = batch.unwrap();
            opt.zero_grad();
            let logits = net.forward_t(&batch.images, true);
            let loss = logits.cross_entropy_loss::<Tensor>(
                &batch.labels,
                None,
                Reduction::Mean,
                -100,
                0.0,
            );
            loss.backward();
            t += 1;
            let std = (ETA / (t as f64).powf(GAMMA)).sqrt();
            let grads: Vec<Tensor> = opt.parameters().iter().map(|(_, p)| p.grad()).collect();
            let sizes: Vec<usize> = grads.iter().map(|g| g.numel()).collect();
            for (mut g, d) in grads.into_iter().zip(draws.draws(t, &sizes)) {
                let noise = Tensor::from_slice(&d).view(g.size().as_slice());
                let _ = g.g_add_(&(noise * std));
            }
            opt.step().unwrap();
            plain += 1;
        }
    }
    assert_eq!(plain, 8, "two epochs of four batches");
    assert_same(&fitted, &sorted(&vs), "fit with GradientNoise vs the hand-written loop");

    // And the noise mattered: without it the weights differ.
    let work2 = common::WorkDir::new("gradient-noise-none");
    let dist = Dist::single(Device::Cpu);
    tch::manual_seed(3);
    let mut vs2 = VarStore::new(Device::Cpu);
    let net2 = common::linear_classifier(&vs2);
    let mut opt2 = Optimizer::sgd(&vs2, 0.05, 0.9);
    let (mut tr, mut va) = (common::three_class_loader(1, 16), common::three_class_loader(2, 8));
    Trainer::new(&dist)
        .epochs(2)
        .out(work2.join("fit"))
        .progress(false)
        .fit(&mut vs2, &net2, &mut opt2, &mut tr, &mut va)
        .unwrap();
    let without = sorted(&vs2);
    assert!(fitted.iter().zip(&without).any(|((_, a), (_, b))| !a.equal(b)));
}

#[test]
fn a_resumed_run_adds_the_noise_the_uninterrupted_one_added() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new("gradient-noise-resume");
    let whole = fit(&work.join("whole"), 3, false);
    fit(&work.join("split"), 1, false);
    let resumed = fit(&work.join("split"), 3, true);
    assert_same(&whole, &resumed, "resumed after epoch 1 vs uninterrupted");
}

#[test]
fn the_schedule_is_optaxs_and_the_draws_a_standard_normal_sample() {
    let _turn = common::module_turn(module_path!());
    // variance eta / t^gamma: exact where the powers are.
    let n = GradientNoise::new(1.0, 2.0, 0).unwrap();
    assert_eq!((n.std_at(1), n.std_at(2), n.std_at(4)), (1.0, 0.5, 0.25));
    let flat = GradientNoise::new(0.01, 0.0, 0).unwrap();
    assert_eq!(flat.std_at(1000), 0.1);
    for (eta, gamma) in [(-0.1, 0.55), (0.3, f64::NAN), (f64::INFINITY, 0.55), (0.3, -1.0)] {
        let err = GradientNoise::new(eta, gamma, 0).unwrap_err().to_string();
        assert!(err.contains("GradientNoise"), "{err}");
    }

    let g = GradientNoise::new(0.3, 0.55, 5).unwrap();
    let size = 200_000usize;
    let d = &g.draws(1, &[size])[0];
    let len = size as f64;
    let mean = d.iter().map(|&v| v as f64).sum::<f64>() / len;
    let var = d.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / len;
    // Five standard errors: the mean's is 1/sqrt(n), the variance's sqrt(2/n).
    assert!(mean.abs() < 5.0 / len.sqrt(), "mean {mean}");
    assert!((var - 1.0).abs() < 5.0 * (2.0 / len).sqrt(), "variance {var}");
    assert_eq!(g.draws(3, &[10, 4]), g.draws(3, &[10, 4]), "the same seed and step");
    assert_ne!(g.draws(3, &[10]), g.draws(4, &[10]), "another step");
    let other = GradientNoise::new(0.3, 0.55, 6).unwrap();
    assert_ne!(g.draws(3, &[10]), other.draws(3, &[10]), "another seed");
}
