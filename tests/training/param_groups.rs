//! Param groups against PyTorch (tests/oracle/param_groups.py, the venv's torch, one thread):
//! three groups (the default, a head with ten times the rate, norms and biases without weight
//! decay) under SGD (`foreach`) and AdamW (`fused`), and a warmup-then-cosine `SequentialLR`
//! started on each group's own rate; and SGD and AdamW under a `OneCycleLR` with one peak and
//! one momentum range per group (`max_lr=[...]`, `base_momentum=[...]`, `max_momentum=[...]`),
//! each group's momentum (AdamW's beta1) cycling. Given torch's gradients, every group's rates, the final
//! weights and the optimizer's state equal torch's bit for bit: the same libtorch kernels run
//! on the same tensors, one call per group as torch.optim makes them.
use crate::common;

use crate::common::{get, with_prefix};
use tch::nn::VarStore;
use tch::{Device, Tensor};
use trainbook::models::load_state_dict;
use trainbook::train::{
    Cadence, CosineAnnealingLR, LinearLR, LrSchedule, OneCycleLR, Optimizer, OptimizerKind,
    ParamGroup, SequentialLR,
};

const NAMES: [&str; 6] =
    ["conv.weight", "conv.bias", "bn.weight", "bn.bias", "fc.weight", "fc.bias"];

fn warmup_then_cosine() -> Box<dyn LrSchedule> {
    Box::new(SequentialLR::new(
        vec![
            Box::new(LinearLR::new(0.25, 1.0, 2)),
            Box::new(CosineAnnealingLR::new(0.0, 4, 1e-4).stepping(Cadence::Step)),
        ],
        vec![2],
    ))
}

/// A variable store holding the oracle's tensors under their names.
fn stand_in_model(ts: &[(String, Tensor)]) -> VarStore {
    let mut vs = VarStore::new(Device::Cpu);
    for name in NAMES {
        let (module, leaf) = name.split_once('.').unwrap();
        let _ = (vs.root() / module).zeros(leaf, &get(ts, &format!("init.{name}")).size());
    }
    load_state_dict(&mut vs, &with_prefix(ts, "init."), true).unwrap();
    vs
}

#[test]
fn three_groups_and_a_schedule_follow_torch_bit_for_bit() {
    let _turn = common::module_turn(module_path!());
    tch::set_num_threads(1);
    let dir = common::WorkDir::new("param-groups");
    let ts = common::oracle_tensors("param_groups.py", "groups", &dir);
    let sgd =
        OptimizerKind::Sgd { momentum: 0.9, dampening: 0.0, nesterov: false, weight_decay: 5e-4 };
    let adamw = OptimizerKind::AdamW { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.05 };
    // A copy of the schedule per group, each started on its group's rate (torch's base_lrs).
    let sequential = |_: usize| warmup_then_cosine();
    follow_torch(&ts, "sgd", 0.05, sgd, &sequential);
    follow_torch(&ts, "adamw", 1e-3, adamw, &sequential);
    // OneCycleLR with one peak and one momentum range per group (torch's lists), the momentum
    // (SGD's, AdamW's beta1) cycling in each group.
    let cycle = OneCycleLR::new(1.0, 6)
        .pct_start(0.5)
        .group_max_lrs(vec![0.05, 0.5, 0.02])
        .group_momentums(vec![(0.85, 0.95), (0.8, 0.9), (0.9, 0.99)]);
    let per_group = |group: usize| cycle.for_group(group, 3).unwrap();
    follow_torch(&ts, "sgd_one_cycle", 0.05, sgd, &per_group);
    follow_torch(&ts, "adamw_one_cycle", 1e-3, adamw, &per_group);
}

/// Six of the oracle's steps of the three groups under `kind`, each group's schedule made by
/// `schedule(group)`, against the oracle's run `name`: every group's rates (and momenta, where
/// the oracle recorded them), the final weights and the optimizer's state, bit for bit.
fn follow_torch(
    ts: &[(String, Tensor)],
    name: &str,
    lr: f64,
    kind: OptimizerKind,
    schedule: &dyn Fn(usize) -> Box<dyn LrSchedule>,
) {
    let vs = stand_in_model(ts);
    let mut opt = Optimizer::new(&vs, kind, lr)
        .param_group(ParamGroup::prefix("fc.").lr(lr * 10.0))
        .unwrap()
        .param_group(ParamGroup::norm_and_bias())
        .unwrap();
    assert_eq!(opt.group_labels(), ["default", "fc.", "no_decay"]);
    assert_eq!(opt.group_parameter_names(0), ["conv.weight"]);
    assert_eq!(opt.group_parameter_names(1), ["fc.weight", "fc.bias"], "the first group wins");
    let mut scheds: Vec<_> = (0..3).map(schedule).collect();
    let lrs: Vec<f64> =
        scheds.iter_mut().zip(opt.group_lrs()).map(|(s, lr)| s.start(lr).unwrap()).collect();
    opt.set_group_lrs(&lrs).unwrap();
    // Each group's momentum, as its copy of the schedule gives it (`fit` does the same).
    let set_momentum = |opt: &mut Optimizer, scheds: &[Box<dyn LrSchedule>]| {
        let momentums: Option<Vec<f64>> = scheds.iter().map(|s| s.momentum()).collect();
        if let Some(each) = momentums {
            opt.set_group_momentums(&each).unwrap();
        }
        opt.group_momentums().into_iter().map(Option::unwrap).collect::<Vec<f64>>()
    };
    let mut seen = vec![opt.group_lrs()];
    let mut momenta = vec![set_momentum(&mut opt, &scheds)];
    let vars = vs.variables();
    for step in 0..6 {
        opt.zero_grad();
        // d/dp sum(p * g) = g exactly: torch's gradients, set through autograd.
        let loss = NAMES
            .iter()
            .map(|n| (&vars[*n] * get(ts, &format!("grad.{step}.{n}"))).sum(None))
            .reduce(|a, b| a + b)
            .unwrap();
        loss.backward();
        opt.step().unwrap();
        let lrs: Vec<f64> = scheds
            .iter_mut()
            .zip(opt.group_lrs())
            .map(|(s, lr)| s.advance(lr, None).unwrap())
            .collect();
        opt.set_group_lrs(&lrs).unwrap();
        seen.push(opt.group_lrs());
        momenta.push(set_momentum(&mut opt, &scheds));
    }
    let rows = |key: &str| -> Vec<Vec<f64>> {
        let t = get(ts, &format!("{name}.{key}"));
        (0..7).map(|i| Vec::<f64>::try_from(t.get(i)).unwrap()).collect()
    };
    assert_eq!(seen, rows("lrs"), "{name}: every group's learning rates");
    if ts.iter().any(|(k, _)| *k == format!("{name}.momenta")) {
        assert_eq!(momenta, rows("momenta"), "{name}: every group's momentum");
    }
    for n in NAMES {
        let w = get(ts, &format!("{name}.final.{n}"));
        assert!(vars[n].equal(w), "{name}: {n} differs from torch's");
    }
    let (state, meta) = opt.state_dict();
    let mut compared = 0;
    for (key, t) in &state {
        let w = get(ts, &format!("{name}.{}", state_key(key)));
        assert!(t.equal(w), "{name}: optimizer state {key} differs from torch's");
        compared += 1;
    }
    let per_param = if name.starts_with("sgd") { 1 } else { 2 };
    assert_eq!(compared, NAMES.len() * per_param, "{name}: every state tensor compared");
    assert_eq!(meta.group_lrs, *seen.last().unwrap());
    assert!(meta.steps.values().all(|s| *s == 6), "{:?}", meta.steps);
}

/// `conv.weight.exp_avg` (trainbook's key) as the oracle's `exp_avg.conv.weight`.
fn state_key(key: &str) -> String {
    let (param, what) = key.rsplit_once('.').unwrap();
    format!("{what}.{param}")
}

/// torchvision's reference groups (`--norm-weight-decay`, `--bias-weight-decay`, `--transformer-embedding-decay`) of real
/// torchvision models, by torch's module classes (tests/oracle/weight_decay_groups.py), against
/// `ParamGroup::torchvision_custom_weight_decay` on a variable store of the same names and shapes.
#[test]
fn torchvision_weight_decay_groups_match_the_references_for_torchvisions_models() {
    let _turn = common::module_turn(module_path!());
    let models = [
        "resnet18",
        "mobilenet_v3_small",
        "efficientnet_b0",
        "convnext_tiny",
        "swin_t",
        "vit_b_32",
    ];
    let out = std::process::Command::new(common::venv_bin("python"))
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oracle/weight_decay_groups.py"))
        .args(models)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let torch: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for model in models {
        let m = &torch[model];
        let vs = VarStore::new(Device::Cpu);
        let shape = |v: &serde_json::Value| -> Vec<i64> {
            v.as_array().unwrap().iter().map(|d| d.as_i64().unwrap()).collect()
        };
        // A variable at a dotted name: the path of its modules, then its own name.
        let at = |name: &str| {
            let (path, leaf) = name.rsplit_once('.').unwrap_or(("", name));
            let p = path.split('.').filter(|s| !s.is_empty()).fold(vs.root(), |p, s| p / s);
            (p, leaf.to_string())
        };
        for p in m["params"].as_array().unwrap() {
            let (path, leaf) = at(p[0].as_str().unwrap());
            let _ = path.zeros(&leaf, &shape(&p[1]));
        }
        for b in m["buffers"].as_array().unwrap() {
            let (path, leaf) = at(b[0].as_str().unwrap());
            let _ = path.zeros_no_train(&leaf, &shape(&b[1]));
        }
        let embeddings = [
            ("bias", 0.0),
            ("class_token", 0.0),
            ("position_embedding", 0.0),
            ("relative_position_bias_table", 0.0),
        ];
        for (setting, custom) in [
            ("norm", &embeddings[..0]),
            ("norm+bias", &embeddings[..1]),
            ("norm+bias+embeddings", &embeddings[..]),
        ] {
            let mut opt = Optimizer::sgd(&vs, 0.1, 0.9);
            for g in ParamGroup::torchvision_custom_weight_decay(&vs, Some(0.0), custom) {
                opt = opt.param_group(g).unwrap();
            }
            let want = m[setting].as_array().unwrap();
            let labels: Vec<&str> = want.iter().map(|g| g[0].as_str().unwrap()).collect();
            let ours: Vec<&str> = opt.group_labels();
            let ours: Vec<&str> =
                ours.iter().map(|l| if *l == "default" { "other" } else { l }).collect();
            assert_eq!(ours, labels, "{model} {setting}");
            for (i, g) in want.iter().enumerate() {
                let mut theirs: Vec<&str> =
                    g[1].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
                let mut names = opt.group_parameter_names(i);
                theirs.sort_unstable();
                names.sort_unstable();
                assert_eq!(names, theirs, "{model} {setting}: group {}", labels[i]);
            }
        }
    }
}
