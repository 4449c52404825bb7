//! Unit tests of the schedules: argument checks, the metric ReduceLROnPlateau looks at, and
//! state that round-trips exactly through JSON. Parity with torch is in
//! tests/training/schedules.rs.
use super::Mode;
use super::*;

fn all() -> Vec<Box<dyn LrSchedule>> {
    vec![
        Box::new(ReduceLROnPlateau::new(Mode::Max).patience(0).factor(0.5)),
        Box::new(StepLR::new(2, 0.5)),
        Box::new(CosineAnnealingLR::new(0.1, 3, 0.001)),
        Box::new(LinearLR::new(0.25, 1.0, 4)),
        Box::new(OneCycleLR::new(0.3, 12)),
        Box::new(OneCycleLR::new(0.3, 12).three_phase(true).anneal_strategy(Anneal::Linear)),
        Box::new(CyclicLR::new(0.01, 0.1, 3).mode(CyclicMode::ExpRange).gamma(0.9)),
        Box::new(MultiStepLR::new(vec![2, 4, 4], 0.5)),
        Box::new(ExponentialLR::new(0.9)),
        Box::new(PolynomialLR::new(8, 2.0)),
        Box::new(CosineAnnealingWarmRestarts::new(3, 2, 0.001)),
        Box::new(LambdaLR::new(|e| 0.9f64.powf(e as f64))),
        Box::new(MultiplicativeLR::new(|e| if e % 2 == 0 { 0.5 } else { 1.0 })),
    ]
}

fn invalid(r: Result<impl std::fmt::Debug>, param: &str) {
    match r {
        Err(Error::InvalidArgument(m)) => assert!(m.contains(param), "{m:?} should name {param}"),
        other => panic!("expected InvalidArgument naming {param}, got {other:?}"),
    }
}

#[test]
fn bad_arguments_name_the_parameter() {
    let cases: Vec<(Box<dyn LrSchedule>, &str)> = vec![
        (Box::new(StepLR::new(0, 0.5)), "step_size"),
        (Box::new(StepLR::new(3, -0.5)), "gamma"),
        (Box::new(CosineAnnealingLR::new(0.1, 0, 0.0)), "t_max"),
        (Box::new(CosineAnnealingLR::new(0.1, 5, -1e-3)), "eta_min"),
        (Box::new(LinearLR::new(0.0, 1.0, 5)), "start_factor"),
        (Box::new(LinearLR::new(1.5, 1.0, 5)), "start_factor"),
        (Box::new(LinearLR::new(0.5, -0.1, 5)), "end_factor"),
        (Box::new(OneCycleLR::new(0.1, 0)), "total_steps"),
        (Box::new(OneCycleLR::new(-0.1, 10)), "max_lr"),
        (Box::new(OneCycleLR::new(0.1, 10).pct_start(1.5)), "pct_start"),
        (Box::new(OneCycleLR::new(0.1, 10).div_factor(0.0)), "div_factor"),
        (Box::new(OneCycleLR::new(0.1, 10).final_div_factor(-1.0)), "final_div_factor"),
        (Box::new(OneCycleLR::new(0.1, 10).base_momentum(-0.1)), "base_momentum"),
        (Box::new(OneCycleLR::new(0.1, 10).max_momentum(f64::NAN)), "max_momentum"),
        (Box::new(OneCycleLR::new(0.1, 10).group_max_lrs(vec![0.1, -1.0])), "group_max_lrs"),
        (Box::new(CyclicLR::new(-0.1, 0.1, 5)), "base_lr"),
        (Box::new(CyclicLR::new(0.1, f64::INFINITY, 5)), "max_lr"),
        (Box::new(CyclicLR::new(0.01, 0.1, 0)), "step_size_up"),
        (Box::new(CyclicLR::new(0.01, 0.1, 5).gamma(0.0)), "gamma"),
        (Box::new(CyclicLR::new(0.01, 0.1, 5).base_momentum(-1.0)), "base_momentum"),
        (Box::new(CyclicLR::new(0.01, 0.1, 5).group_lrs(vec![])), "group_lrs"),
        (Box::new(CyclicLR::new(0.01, 0.1, 5).group_momentums(vec![])), "group_momentums"),
        (
            Box::new(OneCycleLR::new(0.1, 10).group_momentums(vec![(0.8, 0.9), (-0.1, 0.9)])),
            "group_momentums",
        ),
        (Box::new(ReduceLROnPlateau::new(Mode::Min).factor(1.0)), "factor"),
        (Box::new(ReduceLROnPlateau::new(Mode::Min).factor(-0.5)), "factor"),
        (Box::new(ReduceLROnPlateau::new(Mode::Min).min_lr(-1.0)), "min_lr"),
        (Box::new(ReduceLROnPlateau::new(Mode::Min).threshold(f64::NAN, true)), "threshold"),
        (Box::new(MultiStepLR::new(vec![1], -0.1)), "gamma"),
        (Box::new(ExponentialLR::new(f64::INFINITY)), "gamma"),
        (Box::new(PolynomialLR::new(0, 1.0)), "total_iters"),
        (Box::new(PolynomialLR::new(5, f64::NAN)), "power"),
        (Box::new(CosineAnnealingWarmRestarts::new(0, 1, 0.0)), "t_0"),
        (Box::new(CosineAnnealingWarmRestarts::new(2, 0, 0.0)), "t_mult"),
        (Box::new(CosineAnnealingWarmRestarts::new(2, 1, -1.0)), "eta_min"),
        (Box::new(LambdaLR::new(|_| f64::NAN)), "lr_lambda"),
        (Box::new(MultiplicativeLR::new(|_| f64::INFINITY)), "lr_lambda"),
    ];
    let v = Some(Validation { loss: 1.0, accuracy: 0.5, monitored: None });
    for (mut s, param) in cases {
        invalid(s.validate(), param);
        invalid(s.start(0.1), param);
        invalid(s.advance(0.1, v), param);
    }
}

#[test]
fn one_cycle_refuses_steps_past_the_cycle_and_empty_phases() {
    let mut s = OneCycleLR::new(0.1, 10);
    let mut lr = s.start(0.5).unwrap();
    assert!((lr - 0.1 / 25.0).abs() < 1e-15, "the optimizer's rate is replaced: {lr}");
    for _ in 0..10 {
        lr = s.advance(lr, None).unwrap();
    }
    invalid(s.advance(lr, None), "total_steps");
    assert_eq!(s.steps(), 10, "a refused step is not counted");
    // pct_start * total_steps = 1: the first phase ends at step 0 (torch: ZeroDivisionError).
    invalid(OneCycleLR::new(0.1, 4).pct_start(0.25).start(0.1), "pct_start");
}

#[test]
fn plateau_looks_at_the_monitored_value_else_the_loss_or_the_accuracy() {
    // The loss keeps improving while the accuracy stalls.
    let epochs = [(1.0, 0.5), (0.9, 0.5), (0.8, 0.5), (0.7, 0.5)];
    let run = |mode| {
        let mut s = ReduceLROnPlateau::new(mode).patience(1).factor(0.5);
        let mut lr = s.start(0.1).unwrap();
        for (loss, accuracy) in epochs {
            lr = s.advance(lr, Some(Validation { loss, accuracy, monitored: None })).unwrap();
        }
        lr
    };
    assert_eq!(run(Mode::Min), 0.1, "the loss improved every epoch");
    assert_eq!(run(Mode::Max), 0.05, "the accuracy stalled for 2 epochs after the first");
    // A monitored metric (the run's `monitor`) is what it watches, in the mode it was given.
    let mut s = ReduceLROnPlateau::new(Mode::Min).patience(1).factor(0.5);
    let mut lr = s.start(0.1).unwrap();
    for (loss, monitored) in [(1.0, 3.0), (0.9, 3.0), (0.8, 3.0)] {
        lr = s
            .advance(lr, Some(Validation { loss, accuracy: 0.5, monitored: Some(monitored) }))
            .unwrap();
    }
    assert_eq!(lr, 0.05, "the monitored value stalled, though the loss improved");
    invalid(ReduceLROnPlateau::new(Mode::Min).advance(0.1, None), "Validation");
}

#[test]
fn plateau_through_the_trait_equals_its_step_bit_for_bit() {
    let losses = [1.0, 0.9, 0.95, 0.95, 0.95, 0.89, 0.9, 0.9, 0.9, 0.9, 0.9, 0.88];
    let mut a = ReduceLROnPlateau::new(Mode::Min).factor(0.3).patience(1).cooldown(1);
    let mut b: Box<dyn LrSchedule> = Box::new(a.clone());
    let (mut la, mut lb) = (0.07, b.start(0.07).unwrap());
    for loss in losses {
        la = a.step(loss, la);
        lb = b.advance(lb, Some(Validation { loss, accuracy: 0.0, monitored: None })).unwrap();
        assert_eq!(la.to_bits(), lb.to_bits());
    }
    assert_eq!(a.state(), b.state());
}

#[test]
fn state_round_trips_exactly_and_resumes_the_same_sequence() {
    let v = |k: usize| {
        Some(Validation {
            loss: 1.0 / (k as f64 + 3.0),
            accuracy: 0.3 + 0.01 * (k % 3) as f64,
            monitored: None,
        })
    };
    for mut s in all() {
        let mut lr = s.start(0.1 + 0.2).unwrap(); // an lr with a long decimal expansion
        for k in 0..5 {
            lr = s.advance(lr, v(k)).unwrap();
        }
        let saved = serde_json::to_string(&s.state()).unwrap();
        let mut restored = all().into_iter().find(|r| r.name() == s.name()).unwrap();
        restored.load_state(&serde_json::from_str(&saved).unwrap()).unwrap();
        assert_eq!(restored.state(), s.state(), "{}", s.name());
        assert_eq!(restored.steps(), 5);
        let (mut a, mut b) = (lr, serde_json::from_str::<f64>(&lr.to_string()).unwrap());
        for k in 5..12 {
            a = s.advance(a, v(k)).unwrap();
            b = restored.advance(b, v(k)).unwrap();
            assert_eq!(a.to_bits(), b.to_bits(), "{} step {k}", s.name());
        }
    }
}

#[test]
fn json_numbers_parse_back_to_the_same_f64() {
    // serde_json's float_roundtrip feature: without it about one value in ten is off by an ulp.
    let mut s = OneCycleLR::new(0.1, 1000);
    let mut lr = s.start(0.1).unwrap();
    for _ in 0..1000 {
        let back: f64 = serde_json::from_value(serde_json::json!(lr)).unwrap();
        let text: f64 = serde_json::from_str(&serde_json::to_string(&lr).unwrap()).unwrap();
        assert_eq!((back.to_bits(), text.to_bits()), (lr.to_bits(), lr.to_bits()));
        lr = s.advance(lr, None).unwrap();
    }
}

#[test]
fn another_schedule_s_state_is_refused() {
    let states: Vec<_> = all().iter().map(|s| (s.name(), s.state())).collect();
    for mut s in all() {
        for (name, state) in &states {
            if *name != s.name() {
                match s.load_state(state) {
                    Err(Error::Checkpoint(m)) => assert!(m.contains(s.name()), "{m}"),
                    other => panic!("{} loaded {name}'s state: {other:?}", s.name()),
                }
            }
        }
    }
    // What `fit` wrote before the trait: ReduceLROnPlateau's fields as they are.
    let old = serde_json::json!({"mode": "Min", "factor": 0.1, "patience": 5, "threshold": 1e-4,
        "relative_threshold": true, "cooldown": 0, "min_lr": 1e-8, "eps": 1e-8, "best": 0.25,
        "num_bad_epochs": 2, "cooldown_counter": 0, "last_epoch": 7});
    let mut p = ReduceLROnPlateau::new(Mode::Max);
    p.load_state(&old).unwrap();
    assert_eq!((p.mode, p.patience, p.best(), p.steps()), (Mode::Min, 5, Some(0.25), 7));
}

#[test]
fn cadences_and_boxed_copies() {
    let cadences: Vec<Cadence> = all().iter().map(|s| s.cadence()).collect();
    use Cadence::{Epoch, Step};
    assert_eq!(
        cadences,
        [Epoch, Epoch, Epoch, Step, Step, Step, Step, Epoch, Epoch, Epoch, Epoch, Epoch, Epoch]
    );
    assert_eq!(StepLR::new(2, 0.5).stepping(Step).cadence(), Step);
    assert_eq!(LinearLR::new(0.5, 1.0, 3).stepping(Epoch).cadence(), Epoch);
    let mut a: Box<dyn LrSchedule> = Box::new(StepLR::new(1, 0.5));
    let b = a.clone();
    a.advance(0.1, None).unwrap();
    assert_eq!((a.steps(), b.steps()), (1, 0), "a clone is independent");
}

#[test]
fn the_cycling_schedules_write_their_fields_as_before_and_refuse_unknown_ones() {
    // The momentum cycle is one part of both; a checkpoint still holds its four fields beside
    // the schedule's own, as before that part existed.
    let keys = |s: &dyn LrSchedule| {
        let mut k: Vec<String> = s.state().as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    let one_cycle = OneCycleLR::new(0.1, 10).group_momentums(vec![(0.8, 0.9)]);
    assert_eq!(
        keys(&one_cycle),
        [
            "anneal_strategy",
            "base_momentum",
            "cycle_momentum",
            "div_factor",
            "final_div_factor",
            "group_momentums",
            "last_epoch",
            "max_lr",
            "max_momentum",
            "pct_start",
            "three_phase",
            "total_steps"
        ]
    );
    assert_eq!(
        keys(&CyclicLR::new(0.01, 0.1, 4)),
        [
            "base_lr",
            "base_momentum",
            "cycle_momentum",
            "gamma",
            "last_epoch",
            "max_lr",
            "max_momentum",
            "mode",
            "step_size_down",
            "step_size_up"
        ]
    );
    for mut s in all() {
        let mut state = s.state();
        state.as_object_mut().unwrap().insert("momentum".into(), serde_json::json!(0.9));
        match s.load_state(&state) {
            Err(Error::Checkpoint(m)) => assert!(m.contains(s.name()) && m.contains("momentum")),
            other => panic!("{} took an unknown field: {other:?}", s.name()),
        }
    }
    let mut state = one_cycle.state();
    state.as_object_mut().unwrap().insert("max_momentums".into(), serde_json::json!([0.9]));
    let refused = OneCycleLR::new(0.1, 10).load_state(&state).unwrap_err().to_string();
    assert!(refused.contains("unknown field `max_momentums`"), "{refused}");
}
