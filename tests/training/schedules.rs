//! Learning-rate schedules: every schedule's sequence equals torch's `get_last_lr()` (the
//! venv's torch is the oracle), to the last bit, and so does the momentum that `OneCycleLR` and
//! `CyclicLR` cycle (SGD's momentum, Adam's beta1, as torch writes it into the param group). The schedules inside `Trainer::fit`, their
//! resume and their errors are in `schedules_in_fit.rs`.
use crate::common;

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{json, Value};
use trainbook::train::{
    Anneal, Cadence, ChainedScheduler, ConstantLR, CosineAnnealingLR, CosineAnnealingWarmRestarts,
    CyclicLR, CyclicMode, ExponentialLR, LambdaLR, LinearLR, LrSchedule, Mode, MultiStepLR,
    MultiplicativeLR, OneCycleLR, PolynomialLR, ReduceLROnPlateau, SequentialLR, StepLR,
    Validation, SWALR,
};

/// The schedule a torch configuration describes (the keys of tests/oracle/schedules.py).
fn schedule(c: &Value) -> Box<dyn LrSchedule> {
    let f = |k: &str| c[k].as_f64().unwrap();
    let u = |k: &str| c[k].as_u64().unwrap();
    match c["kind"].as_str().unwrap() {
        "StepLR" => Box::new(StepLR::new(u("step_size"), f("gamma"))),
        "CosineAnnealingLR" => Box::new(CosineAnnealingLR::new(f("lr"), u("t_max"), f("eta_min"))),
        "LinearLR" => Box::new(LinearLR::new(f("start_factor"), f("end_factor"), u("total_iters"))),
        "ConstantLR" => Box::new(ConstantLR::new(f("factor"), u("total_iters"))),
        "OneCycleLR" => Box::new(
            match c.get("epochs") {
                None => OneCycleLR::new(f("max_lr"), u("total_steps")),
                Some(_) => {
                    OneCycleLR::with_epochs(f("max_lr"), u("epochs"), u("steps_per_epoch")).unwrap()
                }
            }
            .pct_start(f("pct_start"))
            .anneal_strategy(if c["anneal"] == "cos" { Anneal::Cos } else { Anneal::Linear })
            .div_factor(f("div_factor"))
            .final_div_factor(f("final_div_factor"))
            .three_phase(c["three_phase"].as_bool().unwrap())
            .cycle_momentum(c["cycle_momentum"].as_bool().unwrap_or(false))
            .base_momentum(c["base_momentum"].as_f64().unwrap_or(0.85))
            .max_momentum(c["max_momentum"].as_f64().unwrap_or(0.95)),
        ),
        "CyclicLR" => {
            let mode = match c["mode"].as_str().unwrap() {
                "triangular" => CyclicMode::Triangular,
                "triangular2" => CyclicMode::Triangular2,
                _ => CyclicMode::ExpRange,
            };
            let s = CyclicLR::new(f("base_lr"), f("max_lr"), u("up"))
                .mode(mode)
                .gamma(c["gamma"].as_f64().unwrap_or(1.0))
                .cycle_momentum(c["cycle_momentum"].as_bool().unwrap_or(false))
                .base_momentum(c["base_momentum"].as_f64().unwrap_or(0.8))
                .max_momentum(c["max_momentum"].as_f64().unwrap_or(0.9));
            match c["down"].as_u64() {
                Some(down) => Box::new(s.step_size_down(down)),
                None => Box::new(s),
            }
        }
        "ReduceLROnPlateau" => Box::new(
            ReduceLROnPlateau::new(if c["mode"] == "min" { Mode::Min } else { Mode::Max })
                .factor(f("factor"))
                .patience(u("patience"))
                .threshold(f("threshold"), c["threshold_mode"] == "rel")
                .cooldown(u("cooldown"))
                .min_lr(f("min_lr")),
        ),
        "SequentialLR" => Box::new(SequentialLR::new(
            parts(c),
            c["milestones"].as_array().unwrap().iter().map(|m| m.as_u64().unwrap()).collect(),
        )),
        "ChainedScheduler" => Box::new(ChainedScheduler::new(parts(c))),
        _ => factor_schedule(c, Cadence::Epoch),
    }
}

/// The step function a configuration's `fn` names (tests/oracle/schedules.py's `function`).
fn function(spec: &Value) -> impl Fn(u64) -> f64 + Send + Sync + 'static {
    let (name, a) = (spec[0].as_str().unwrap().to_string(), spec[1].as_f64().unwrap());
    move |e: u64| match name.as_str() {
        "pow" => a.powf(e as f64),
        "warm" => ((e + 1) as f64 / a).min(1.0),
        other => panic!("unknown function {other}"),
    }
}

/// The schedules added with torchvision's recipe (MultiStepLR ... MultiplicativeLR).
fn factor_schedule(c: &Value, cadence: Cadence) -> Box<dyn LrSchedule> {
    let f = |k: &str| c[k].as_f64().unwrap();
    let u = |k: &str| c[k].as_u64().unwrap();
    match c["kind"].as_str().unwrap() {
        "MultiStepLR" => Box::new(
            MultiStepLR::new(
                c["milestones"].as_array().unwrap().iter().map(|m| m.as_u64().unwrap()).collect(),
                f("gamma"),
            )
            .stepping(cadence),
        ),
        "ExponentialLR" => Box::new(ExponentialLR::new(f("gamma")).stepping(cadence)),
        "PolynomialLR" => {
            Box::new(PolynomialLR::new(u("total_iters"), f("power")).stepping(cadence))
        }
        "CosineAnnealingWarmRestarts" => Box::new(
            CosineAnnealingWarmRestarts::new(u("t_0"), u("t_mult"), f("eta_min")).stepping(cadence),
        ),
        "LambdaLR" => Box::new(LambdaLR::new(function(&c["fn"])).stepping(cadence)),
        "MultiplicativeLR" => Box::new(MultiplicativeLR::new(function(&c["fn"])).stepping(cadence)),
        "SWALR" => {
            let anneal = if c["anneal"] == "cos" { Anneal::Cos } else { Anneal::Linear };
            Box::new(SWALR::new(f("swa_lr"), u("anneal_epochs"), anneal).stepping(cadence))
        }
        other => panic!("unknown schedule {other}"),
    }
}

/// A composite's parts, all stepped per optimizer step (one cadence, as the composites ask).
fn parts(c: &Value) -> Vec<Box<dyn LrSchedule>> {
    let per_step = |p: &Value| -> Box<dyn LrSchedule> {
        let u = |k: &str| p[k].as_u64().unwrap();
        let f = |k: &str| p[k].as_f64().unwrap();
        match p["kind"].as_str().unwrap() {
            "StepLR" => Box::new(StepLR::new(u("step_size"), f("gamma")).stepping(Cadence::Step)),
            "CosineAnnealingLR" => Box::new(
                CosineAnnealingLR::new(0.0, u("t_max"), f("eta_min")).stepping(Cadence::Step),
            ),
            "LinearLR" | "ConstantLR" | "OneCycleLR" | "ReduceLROnPlateau" => schedule(p),
            _ => factor_schedule(p, Cadence::Step),
        }
    };
    c["schedules"].as_array().unwrap().iter().map(per_step).collect()
}

/// torch's composites over the other schedules (warmup then cosine, three phases, a milestone
/// at 0, a warmup restarted after a cosine, warmups chained into decays).
fn composite_configs() -> Vec<Value> {
    let linear = |lr: f64, s: f64, e: f64, t: u64| json!({"kind": "LinearLR", "lr": lr, "start_factor": s, "end_factor": e, "total_iters": t});
    let cosine =
        |t: u64, eta: f64| json!({"kind": "CosineAnnealingLR", "t_max": t, "eta_min": eta});
    let step = |n: u64, g: f64| json!({"kind": "StepLR", "step_size": n, "gamma": g});
    let seq = |lr: f64, parts: Vec<Value>, milestones: Vec<u64>, steps: u64| json!({"kind": "SequentialLR", "lr": lr, "schedules": parts, "milestones": milestones, "steps": steps});
    let chain = |lr: f64, parts: Vec<Value>, steps: u64| json!({"kind": "ChainedScheduler", "lr": lr, "schedules": parts, "steps": steps});
    let multistep = |m: &[u64], g: f64| json!({"kind": "MultiStepLR", "milestones": m, "gamma": g});
    let exponential = |g: f64| json!({"kind": "ExponentialLR", "gamma": g});
    let poly = |t: u64, p: f64| json!({"kind": "PolynomialLR", "total_iters": t, "power": p});
    let warm_restarts = |t0: u64, tm: u64, eta: f64| json!({"kind": "CosineAnnealingWarmRestarts", "t_0": t0, "t_mult": tm, "eta_min": eta});
    let lambda = |kind: &str, f: &str, a: f64| json!({"kind": kind, "fn": [f, a]});
    let constant = |f: f64, t: u64| json!({"kind": "ConstantLR", "factor": f, "total_iters": t});
    vec![
        // torchvision's classification reference: its default constant warmup (--lr-warmup-decay
        // 0.01) into each of its three main schedules.
        seq(0.5, vec![constant(0.01, 5), cosine(15, 0.0)], vec![5], 22),
        seq(0.1, vec![constant(0.01, 3), step(2, 0.1)], vec![3], 10),
        seq(0.064, vec![constant(0.1, 2), exponential(0.973)], vec![2], 8),
        chain(0.1, vec![constant(0.5, 3), cosine(6, 0.001)], 8),
        seq(0.1, vec![linear(0.1, 0.1, 1.0, 5), cosine(10, 0.001)], vec![5], 20),
        seq(
            0.05,
            vec![linear(0.05, 1.0 / 3.0, 1.0, 3), step(2, 0.5), cosine(4, 0.0)],
            vec![3, 8],
            16,
        ),
        seq(0.3, vec![step(3, 0.1), linear(0.3, 0.5, 1.0, 4)], vec![4], 10),
        seq(0.02, vec![cosine(3, 1e-4), linear(0.02, 0.25, 1.0, 5)], vec![6], 17),
        seq(0.1, vec![step(2, 0.5), linear(0.1, 0.2, 1.0, 3)], vec![0], 6),
        chain(0.1, vec![linear(0.1, 0.1, 1.0, 4), cosine(8, 0.0)], 12),
        chain(0.2, vec![step(2, 0.9), linear(0.2, 0.5, 1.0, 3)], 9),
        chain(0.1, vec![cosine(5, 0.01), step(3, 0.5)], 10),
        // The recipe's schedules inside the composites: a warmup into each of them, a restart
        // of the non-chainable ones at a milestone, chains over them.
        seq(0.1, vec![linear(0.1, 0.01, 1.0, 5), multistep(&[3, 6], 0.1)], vec![5], 14),
        seq(0.1, vec![linear(0.1, 0.1, 1.0, 3), exponential(0.9)], vec![3], 10),
        seq(0.2, vec![linear(0.2, 0.5, 1.0, 2), poly(6, 2.0)], vec![2], 10),
        seq(0.1, vec![exponential(0.8), warm_restarts(3, 2, 0.001)], vec![4], 15),
        seq(0.1, vec![exponential(0.8), lambda("LambdaLR", "warm", 3.0)], vec![4], 10),
        seq(0.1, vec![exponential(0.8), lambda("MultiplicativeLR", "pow", 0.9)], vec![4], 10),
        chain(0.1, vec![linear(0.1, 0.1, 1.0, 4), multistep(&[5, 5, 8], 0.5)], 12),
        chain(0.1, vec![exponential(0.9), lambda("LambdaLR", "pow", 0.95)], 8),
        chain(0.1, vec![lambda("MultiplicativeLR", "pow", 0.97), poly(5, 1.0)], 8),
        chain(0.1, vec![step(3, 0.5), warm_restarts(4, 1, 0.0)], 10),
    ]
}

fn configs() -> Vec<Value> {
    let mut c = Vec::new();
    for (lr, step_size, gamma, steps) in [(0.1, 1, 0.5, 10), (0.05, 3, 0.1, 12), (0.3, 7, 0.9, 30)]
    {
        c.push(json!({"kind": "StepLR", "lr": lr, "step_size": step_size, "gamma": gamma, "steps": steps}));
    }
    for (lr, t_max, eta_min, steps) in [
        (0.1, 4, 0.001, 12),
        (0.05, 10, 0.0, 35),
        (1.0, 1, 0.1, 6),
        (0.01, 7, 1e-4, 30),
        (0.3, 3, 0.0, 13),
    ] {
        c.push(json!({"kind": "CosineAnnealingLR", "lr": lr, "t_max": t_max, "eta_min": eta_min, "steps": steps}));
    }
    for (lr, start, end, total, steps) in [
        (0.1, 1.0 / 3.0, 1.0, 5, 10),
        (0.05, 0.1, 1.0, 10, 15),
        (0.2, 1.0, 0.25, 4, 8),
        (0.1, 0.5, 0.5, 3, 5),
        (0.1, 0.3, 0.9, 0, 3),
        (0.003, 0.001, 1.0, 100, 110),
    ] {
        c.push(json!({"kind": "LinearLR", "lr": lr, "start_factor": start, "end_factor": end,
                      "total_iters": total, "steps": steps}));
    }
    for (lr, factor, total, steps) in
        [(0.1, 1.0 / 3.0, 5, 8), (0.5, 0.01, 3, 6), (0.2, 1.0, 2, 4), (0.1, 0.25, 0, 3)]
    {
        c.push(json!({"kind": "ConstantLR", "lr": lr, "factor": factor, "total_iters": total,
                      "steps": steps}));
    }
    for (max_lr, total, pct, anneal, div, final_div, three) in [
        (0.1, 100, 0.3, "cos", 25.0, 1e4, false),
        (0.01, 37, 0.25, "linear", 25.0, 1e4, false),
        (0.5, 50, 0.3, "cos", 25.0, 1e4, true),
        (0.3, 20, 0.4, "linear", 10.0, 100.0, true),
        (1.0, 2, 0.3, "cos", 25.0, 1e4, false),
        (0.1, 7, 0.0, "cos", 5.0, 1e3, false),
        (0.02, 469 * 3, 0.3, "cos", 25.0, 1e4, false),
    ] {
        c.push(json!({"kind": "OneCycleLR", "lr": 0.5, "max_lr": max_lr, "total_steps": total,
                      "pct_start": pct, "anneal": anneal, "div_factor": div,
                      "final_div_factor": final_div, "three_phase": three, "steps": total}));
    }
    // CyclicLR's three modes, a longer or no way down, a top below the bottom, long runs.
    for (base, max, up, down, mode, gamma, steps) in [
        (0.001, 0.1, 4, None, "triangular", 1.0, 20),
        (0.01, 0.05, 3, Some(5), "triangular2", 1.0, 40),
        (0.0, 0.3, 7, Some(2), "exp_range", 0.97, 50),
        (0.1, 0.01, 5, None, "triangular", 1.0, 25),
        (0.02, 0.2, 3, Some(0), "triangular", 1.0, 10),
        (0.001, 0.006, 250, None, "exp_range", 0.99994, 2100),
        (0.001, 0.006, 200, Some(300), "triangular2", 1.0, 2600),
    ] {
        let mut cfg = json!({"kind": "CyclicLR", "lr": 0.5, "base_lr": base, "max_lr": max,
                             "up": up, "mode": mode, "gamma": gamma, "steps": steps});
        if let Some(down) = down {
            cfg["down"] = json!(down);
        }
        c.push(cfg);
    }
    // torch's other constructor: OneCycleLR(..., epochs=3, steps_per_epoch=469).
    c.push(json!({"kind": "OneCycleLR", "lr": 0.5, "max_lr": 0.02, "epochs": 3,
                  "steps_per_epoch": 469, "pct_start": 0.3, "anneal": "cos", "div_factor": 25.0,
                  "final_div_factor": 1e4, "three_phase": false, "steps": 469 * 3}));
    // The momentum that cycle_momentum writes (SGD's momentum, Adam's beta1), step by step.
    for (total, pct, anneal, three, optimizer, base, max) in [
        (100, 0.3, "cos", false, "sgd", 0.85, 0.95),
        (37, 0.25, "linear", false, "adam", 0.85, 0.95),
        (50, 0.3, "cos", true, "adam", 0.85, 0.95),
        (20, 0.4, "linear", true, "sgd", 0.8, 0.99),
        (469 * 3, 0.3, "cos", false, "adam", 0.9, 0.9),
    ] {
        c.push(json!({"kind": "OneCycleLR", "lr": 0.5, "max_lr": 0.1, "total_steps": total,
                      "pct_start": pct, "anneal": anneal, "div_factor": 25.0,
                      "final_div_factor": 1e4, "three_phase": three, "steps": total,
                      "cycle_momentum": true, "optimizer": optimizer, "record": "momentum",
                      "base_momentum": base, "max_momentum": max}));
    }
    // CyclicLR's momentum (cycle_momentum, on by default in torch).
    for (optimizer, mode, gamma, up, down, steps, base, max) in [
        ("sgd", "triangular", 1.0, 4, None, 20, 0.8, 0.9),
        ("adam", "exp_range", 0.95, 3, Some(6), 30, 0.85, 0.95),
        ("sgd", "triangular2", 1.0, 5, None, 40, 0.8, 0.9),
    ] {
        let mut cfg = json!({"kind": "CyclicLR", "lr": 0.5, "base_lr": 0.001, "max_lr": 0.1,
                             "up": up, "mode": mode, "gamma": gamma, "steps": steps,
                             "cycle_momentum": true, "optimizer": optimizer,
                             "record": "momentum", "base_momentum": base, "max_momentum": max});
        if let Some(down) = down {
            cfg["down"] = json!(down);
        }
        c.push(cfg);
    }
    for (lr, milestones, gamma, steps) in
        [(0.1, vec![2, 5], 0.1, 8), (0.05, vec![3, 3, 6, 1], 0.5, 9), (0.2, vec![0, 4], 0.3, 6)]
    {
        c.push(json!({"kind": "MultiStepLR", "lr": lr, "milestones": milestones, "gamma": gamma, "steps": steps}));
    }
    for (lr, gamma, steps) in [(0.1, 0.95, 30), (0.3, 0.5, 12), (1.0, 1.0, 4), (0.01, 0.0, 3)] {
        c.push(json!({"kind": "ExponentialLR", "lr": lr, "gamma": gamma, "steps": steps}));
    }
    for (lr, total, power, steps) in
        [(0.1, 5, 1.0, 8), (0.5, 10, 2.0, 12), (0.03, 7, 0.9, 7), (0.1, 1, 3.0, 3)]
    {
        c.push(json!({"kind": "PolynomialLR", "lr": lr, "total_iters": total, "power": power, "steps": steps}));
    }
    for (lr, t0, tmult, eta, steps) in
        [(0.1, 5, 1, 0.0, 17), (0.1, 3, 2, 0.001, 30), (0.5, 1, 1, 0.01, 5), (0.05, 4, 3, 0.0, 40)]
    {
        c.push(json!({"kind": "CosineAnnealingWarmRestarts", "lr": lr, "t_0": t0, "t_mult": tmult, "eta_min": eta, "steps": steps}));
    }
    for (kind, f, a, steps) in [
        ("LambdaLR", "pow", 0.95, 20),
        ("LambdaLR", "warm", 5.0, 10),
        ("MultiplicativeLR", "pow", 0.99, 15),
        ("MultiplicativeLR", "warm", 3.0, 6),
    ] {
        c.push(json!({"kind": kind, "lr": 0.1, "fn": [f, a], "steps": steps}));
    }
    for (lr, swa_lr, anneal_epochs, anneal, steps) in [
        (0.1, 0.05, 10, "cos", 14),
        (0.1, 0.05, 4, "linear", 7),
        (0.02, 0.5, 3, "cos", 5),
        (0.3, 0.01, 0, "cos", 3),
        (0.05, 0.05, 5, "linear", 6),
    ] {
        c.push(json!({"kind": "SWALR", "lr": lr, "swa_lr": swa_lr, "anneal_epochs": anneal_epochs,
                      "anneal": anneal, "steps": steps}));
    }
    // Metrics with plateaus, improvements and ties (an LCG over a few levels).
    let mut x = 7u64;
    let metrics: Vec<f64> = (0..40)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            1.0 - 0.01 * ((x >> 60) as f64)
        })
        .collect();
    for mode in ["min", "max"] {
        for (factor, patience, threshold, threshold_mode, cooldown, min_lr) in [
            (0.5, 2, 1e-4, "rel", 1, 0.01),
            (0.1, 0, 0.05, "abs", 0, 0.0),
            (0.3, 1, 0.01, "rel", 2, 1e-3),
            (0.7, 3, 0.0, "abs", 0, 1e-6),
        ] {
            c.push(json!({"kind": "ReduceLROnPlateau", "lr": 0.1, "mode": mode, "factor": factor,
                          "patience": patience, "threshold": threshold,
                          "threshold_mode": threshold_mode, "cooldown": cooldown,
                          "min_lr": min_lr, "metrics": metrics, "steps": metrics.len()}));
        }
    }
    c
}

fn torch_sequences(configs: &[Value]) -> Vec<Vec<f64>> {
    let mut child = Command::new(common::venv_bin("python"))
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oracle/schedules.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let input = Value::Array(configs.to_vec()).to_string();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "the torch oracle failed");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn every_schedule_gives_torch_s_learning_rates_bit_for_bit() {
    let _turn = common::module_turn(module_path!());
    let configs: Vec<Value> = configs().into_iter().chain(composite_configs()).collect();
    let want = torch_sequences(&configs);
    let kinds: std::collections::BTreeSet<&str> =
        configs.iter().map(|c| c["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.len(), 16);
    let momentums = configs.iter().filter(|c| c["record"] == "momentum").count();
    assert_eq!(momentums, 8, "OneCycleLR's and CyclicLR's momentum sequences");
    for (c, want) in configs.iter().zip(&want) {
        let mut s = schedule(c);
        // The rate, or with "record": "momentum" the momentum the schedule sets with it.
        let momentum = c["record"] == "momentum";
        let value = |s: &dyn LrSchedule, lr: f64| if momentum { s.momentum().unwrap() } else { lr };
        let mut lr = s.start(c["lr"].as_f64().unwrap()).unwrap();
        let mut got = vec![value(s.as_ref(), lr)];
        for k in 0..c["steps"].as_u64().unwrap() as usize {
            let m = c["metrics"].get(k).and_then(Value::as_f64).unwrap_or(0.0);
            lr = s.advance(lr, Some(Validation { loss: m, accuracy: m, monitored: None })).unwrap();
            got.push(value(s.as_ref(), lr));
        }
        assert_eq!(got.len(), want.len(), "{c}");
        for (k, (a, b)) in got.iter().zip(want).enumerate() {
            // Same formulas in the same order on the same libm: equal to the last bit.
            assert_eq!(a.to_bits(), b.to_bits(), "{} step {k}: {a} vs torch {b} ({c})", s.name());
        }
    }
}
