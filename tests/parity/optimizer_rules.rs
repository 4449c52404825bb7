//! RMSprop, NAdam, RAdam, Adagrad, Adadelta and Adamax (`UpdateRule`s) against torch.optim's
//! single-tensor loops (tests/oracle/optimizer_rules.py): an MLP trained 10 steps from PyTorch's
//! weights with each setting (defaults, RMSprop centered with momentum and weight decay, NAdam
//! and RAdam with L2 and decoupled decay, Adagrad, Adadelta and Adamax with every
//! hyper-parameter set, RMSprop with two param groups) ends with torch's weights and state
//! tensors bit for bit and took the same losses; its state exported and restored after 5 steps
//! changes nothing. With a `OneCycleLR` whose momentum cycles (torch's default), RMSprop, NAdam,
//! RAdam, Adamax, SGD and Adam end with torch's weights bit for bit too. Both sides on one thread.
//! Through `fit`, a run with RMSprop stopped after an
//! epoch and resumed ends on the uninterrupted run's weights; under GradScaler a rule steps on
//! the unscaled gradients (the weights of an unscaled run, bit for bit) and skips the step of
//! an inf gradient.
use crate::common;

use std::sync::Arc;

use tch::nn::{self, Module, VarStore};
use tch::{Device, Kind, Tensor};
use trainbook::data::{DataLoader, TensorDataset};
use trainbook::dist::Dist;
use trainbook::fit::Trainer;
use trainbook::train::{
    Adadelta, Adagrad, Adamax, CrossEntropyLoss, LrSchedule, NAdam, OneCycleLR, Optimizer,
    ParamGroup, RAdam, RMSprop, SharedRule,
};

/// The tests here seed and draw from libtorch's global generator: they take turns.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

const SETTINGS: [&str; 21] = [
    "rmsprop",
    "rmsprop_full",
    "nadam",
    "nadam_l2",
    "nadamw",
    "radam",
    "radam_l2",
    "radamw",
    "rmsprop_groups",
    "adagrad",
    "adagrad_full",
    "adadelta",
    "adadelta_full",
    "adamax",
    "adamax_full",
    "adamax_one_cycle",
    "rmsprop_one_cycle",
    "nadam_one_cycle",
    "radam_one_cycle",
    "sgd_one_cycle",
    "adam_one_cycle",
];

/// The oracle's `nn.Sequential(Linear(6, 5), Tanh(), Linear(5, 3))` under its names.
fn mlp(vs: &VarStore) -> impl Module {
    let root = vs.root();
    nn::seq()
        .add(nn::linear(&root / "0", 6, 5, Default::default()))
        .add_fn(|x| x.tanh())
        .add(nn::linear(&root / "2", 5, 3, Default::default()))
}

/// The optimizer of a setting, as the oracle builds it.
fn optimizer(vs: &VarStore, setting: &str) -> Optimizer {
    let (rule, lr): (SharedRule, f64) = match setting {
        "rmsprop" | "rmsprop_groups" => (Arc::new(RMSprop::default()), 0.01),
        "rmsprop_full" => {
            let full = RMSprop {
                alpha: 0.9,
                eps: 0.0316,
                weight_decay: 1e-4,
                momentum: 0.9,
                centered: true,
            };
            (Arc::new(full), 0.01)
        }
        "sgd_one_cycle" => return Optimizer::sgd(vs, 0.01, 0.9),
        "adam_one_cycle" => return Optimizer::adam(vs, 1e-3),
        "rmsprop_one_cycle" => (Arc::new(RMSprop::default()), 0.01),
        "nadam_one_cycle" => (Arc::new(NAdam::default()), 2e-3),
        "radam_one_cycle" => (Arc::new(RAdam::default()), 1e-3),
        "nadam" => (Arc::new(NAdam::default()), 2e-3),
        "nadam_l2" => (Arc::new(NAdam { weight_decay: 0.01, ..Default::default() }), 2e-3),
        "nadamw" => {
            let w =
                NAdam { weight_decay: 0.01, decoupled_weight_decay: true, ..Default::default() };
            (Arc::new(w), 2e-3)
        }
        "radam" => (Arc::new(RAdam::default()), 1e-3),
        "radam_l2" => (Arc::new(RAdam { weight_decay: 0.01, ..Default::default() }), 1e-3),
        "radamw" => {
            let w =
                RAdam { weight_decay: 0.01, decoupled_weight_decay: true, ..Default::default() };
            (Arc::new(w), 1e-3)
        }
        "adagrad" => (Arc::new(Adagrad::default()), 0.05),
        "adagrad_full" => {
            let full = Adagrad {
                lr_decay: 0.01,
                weight_decay: 1e-3,
                initial_accumulator_value: 0.1,
                eps: 1e-6,
            };
            (Arc::new(full), 0.05)
        }
        "adadelta" => (Arc::new(Adadelta::default()), 1.0),
        "adadelta_full" => (Arc::new(Adadelta { rho: 0.8, eps: 1e-5, weight_decay: 1e-3 }), 0.5),
        "adamax" | "adamax_one_cycle" => (Arc::new(Adamax::default()), 2e-3),
        "adamax_full" => {
            let full = Adamax { beta1: 0.8, beta2: 0.99, eps: 1e-6, weight_decay: 1e-3 };
            (Arc::new(full), 5e-3)
        }
        other => panic!("unknown setting {other}"),
    };
    let opt = Optimizer::with_rule(vs, rule, lr);
    if setting == "rmsprop_groups" {
        return opt.param_group(ParamGroup::prefix("0.").lr(0.02).weight_decay(1e-3)).unwrap();
    }
    opt
}

#[test]
fn update_rules_equal_torch_optim_bit_for_bit() {
    let _turn = common::module_turn(module_path!());
    let _serial = serial();
    tch::set_num_threads(1);
    let work = common::WorkDir::new("optimizer-rules");
    let oracle = common::oracle_tensors("optimizer_rules.py", "rules", &work);
    let get = |name: &str| common::get(&oracle, name).shallow_clone();
    let (x, y) = (get("x"), get("y"));
    for setting in SETTINGS {
        let vs = VarStore::new(Device::Cpu);
        let net = mlp(&vs);
        tch::no_grad(|| {
            for (name, v) in vs.variables() {
                v.shallow_clone().copy_(&get(&format!("init.{name}")));
            }
        });
        let mut opt = optimizer(&vs, setting);
        // OneCycleLR with torch's momentum cycling, set as `fit` sets it.
        let mut cycle = setting.ends_with("_one_cycle").then(|| OneCycleLR::new(0.05, 10));
        let follow = |cycle: &Option<OneCycleLR>, opt: &mut Optimizer, lr: f64| {
            if let Some(c) = cycle {
                opt.set_lr(lr);
                opt.set_momentum(c.momentum().unwrap()).unwrap();
            }
        };
        let mut lr = match &mut cycle {
            Some(c) => c.start(opt.lr()).unwrap(),
            None => opt.lr(),
        };
        follow(&cycle, &mut opt, lr);
        let mut losses = Vec::new();
        for step in 0..10 {
            if step == 5 {
                // A checkpoint's round trip: the same trajectory.
                let (tensors, meta) = opt.state_dict();
                let mut fresh = optimizer(&vs, setting);
                fresh.load_state_dict(&tensors, &meta).unwrap();
                opt = fresh;
                follow(&cycle, &mut opt, lr);
            }
            opt.zero_grad();
            let loss = CrossEntropyLoss::new().mean(&net.forward(&x), &y);
            loss.backward();
            opt.step().unwrap();
            if let Some(c) = &mut cycle {
                lr = c.advance(lr, None).unwrap();
            }
            follow(&cycle, &mut opt, lr);
            losses.push(loss.double_value(&[]));
        }
        if let Some(c) = &cycle {
            // The momentum moved (from 0.95 down to 0.85 and back), and was written.
            let m = opt.momentum().unwrap();
            assert!(m != 0.9 && m != 0.0 && m == c.momentum().unwrap(), "{setting}: {m}");
        }
        let want: Vec<f64> = Vec::try_from(get(&format!("{setting}.losses"))).unwrap();
        assert_eq!(losses, want, "{setting}: the losses");
        for (name, v) in vs.variables() {
            assert!(v.equal(&get(&format!("{setting}.{name}"))), "{setting}: {name}");
        }
        let (state, _) = opt.state_dict();
        let prefix = format!("{setting}.state.");
        let theirs = common::with_prefix(&oracle, &prefix);
        assert_eq!(state.len(), theirs.len(), "{setting}: the state tensors");
        for (key, t) in &state {
            let want = &theirs.iter().find(|(k, _)| k == key).unwrap_or_else(|| panic!("{key}")).1;
            assert!(t.equal(want), "{setting}: state {key}");
        }
    }
}

#[test]
fn a_rule_resumes_exactly_through_fit_and_refuses_another_rules_state() {
    let _turn = common::module_turn(module_path!());
    let _serial = serial();
    let dist = Dist::single(Device::Cpu);
    let work = common::WorkDir::new("rule-resume");
    tch::manual_seed(4);
    let xs = Tensor::randn([24, 6, 1, 1], (Kind::Float, Device::Cpu));
    let ys = Tensor::randint(3, [24], (Kind::Int64, Device::Cpu));
    let data = || {
        let ds = TensorDataset::new(&xs, &ys, (0..3).map(|c| c.to_string()).collect()).unwrap();
        DataLoader::new(ds, 8).num_workers(0)
    };
    let run = |out: &std::path::Path, epochs: u64, resume: bool| -> Vec<(String, Tensor)> {
        tch::manual_seed(5);
        let mut vs = VarStore::new(Device::Cpu);
        let head = nn::linear(vs.root() / "fc", 6, 3, Default::default());
        let net = nn::seq_t().add_fn(|x| x.flatten(1, -1)).add(head);
        let rule = RMSprop { momentum: 0.9, centered: true, ..Default::default() };
        let mut opt = Optimizer::with_rule(&vs, Arc::new(rule), 0.01);
        Trainer::new(&dist)
            .epochs(epochs)
            .out(out)
            .resume(resume)
            .progress(false)
            .fit(&mut vs, &net, &mut opt, &mut data(), &mut data())
            .unwrap();
        let mut vars: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
        vars.sort_by(|a, b| a.0.cmp(&b.0));
        vars
    };
    let whole = run(&work.join("whole"), 2, false);
    run(&work.join("parts"), 1, false);
    let resumed = run(&work.join("parts"), 2, true);
    for ((name, a), (_, b)) in whole.iter().zip(&resumed) {
        assert!(a.equal(b), "{name} after a resume");
    }
    // A state of another rule is refused, naming both.
    let vs = VarStore::new(Device::Cpu);
    let _ = mlp(&vs);
    let mut rms = optimizer(&vs, "rmsprop");
    let (tensors, meta) = optimizer(&vs, "nadam").state_dict();
    let err = rms.load_state_dict(&tensors, &meta).unwrap_err().to_string();
    assert!(err.contains("NAdam") && err.contains("RMSprop"), "{err}");
}

#[test]
fn grad_scaler_unscales_for_a_rule_and_skips_its_step_on_an_inf_gradient() {
    let _turn = common::module_turn(module_path!());
    let _serial = serial();
    tch::set_num_threads(1);
    tch::manual_seed(8);
    let x = Tensor::randn([16, 6], (Kind::Float, Device::Cpu));
    let y = Tensor::randint(3, [16], (Kind::Int64, Device::Cpu));
    let model = || {
        tch::manual_seed(9);
        let vs = VarStore::new(Device::Cpu);
        let net = mlp(&vs);
        (vs, net)
    };
    let (plain_vs, plain) = model();
    let (scaled_vs, scaled) = model();
    let mut plain_opt = optimizer(&plain_vs, "nadam");
    let mut scaled_opt = optimizer(&scaled_vs, "nadam");
    let mut scaler = trainbook::train::GradScaler::new(Device::Cpu);
    for step in 0..4 {
        plain_opt.zero_grad();
        CrossEntropyLoss::new().mean(&plain.forward(&x), &y).backward();
        scaled_opt.zero_grad();
        scaler.scale(&CrossEntropyLoss::new().mean(&scaled.forward(&x), &y)).backward();
        let sorted = || {
            let mut vars: Vec<(String, Tensor)> = scaled_vs.variables().into_iter().collect();
            vars.sort_by(|a, b| a.0.cmp(&b.0));
            vars.into_iter().map(|(_, t)| t.copy()).collect::<Vec<Tensor>>()
        };
        let before = sorted();
        let state_before = scaled_opt.state_dict().0.len();
        if step == 2 {
            // An inf gradient: the step is skipped, nothing changes (and the plain run skips
            // its step too, to stay comparable).
            let _ = scaled_vs.variables()["2.bias"].grad().get(0).fill_(f64::INFINITY);
            let found_inf = scaler.step(&mut scaled_opt).unwrap();
            assert_eq!(found_inf.double_value(&[]), 1.0);
            assert!(before.iter().zip(&sorted()).all(|(a, b)| a.equal(b)), "a skipped step");
            assert_eq!(scaled_opt.state_dict().0.len(), state_before);
            continue;
        }
        plain_opt.step().unwrap();
        // The scale is a power of two: the unscaled gradients are the plain ones exactly.
        assert_eq!(scaler.step(&mut scaled_opt).unwrap().double_value(&[]), 0.0);
    }
    for (name, v) in plain_vs.variables() {
        assert!(v.equal(&scaled_vs.variables()[&name]), "{name} with and without the scaler");
    }
}
