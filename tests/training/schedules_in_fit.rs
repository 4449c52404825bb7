//! Learning-rate schedules inside `Trainer::fit`: it follows the standalone schedule (per epoch
//! and per optimizer step), a run resumed from a mid-epoch checkpoint ends with the same rate
//! and bitwise the same weights as an uninterrupted one, bad arguments are errors of `fit`, and
//! composite schedules refuse what torch refuses and restore their parts. (The schedules'
//! sequences against torch's are in `schedules.rs`.)
use crate::common;

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};
use trainbook::checkpoint::Policy;
use trainbook::data::{DataLoader, DistributedSampler, TensorDataset};
use trainbook::dist::Dist;
use trainbook::fit::{FitConfig, FitReport, Trainer};
use trainbook::models::MnistNet;
use trainbook::train::{
    Cadence, ChainedScheduler, CosineAnnealingLR, CyclicLR, CyclicMode, LinearLR, LrSchedule, Mode,
    Monitor, OneCycleLR, Optimizer, ReduceLROnPlateau, SequentialLR, StepLR, Validation,
};
use trainbook::Error;

/// Runs are exact only with libtorch's random stream to themselves: one test at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

const SAMPLES: i64 = 24; // 6 optimizer steps of 4 per epoch
const STEPS_PER_EPOCH: usize = 6;
const EPOCHS: u64 = 3;

fn loader(seed: i64, n: i64) -> DataLoader<TensorDataset> {
    tch::manual_seed(seed);
    let x = Tensor::randn([n, 1, 28, 28], (Kind::Float, Device::Cpu));
    let y = Tensor::randint(10, [n], (Kind::Int64, Device::Cpu));
    let ds = TensorDataset::new(&x, &y, (0..10).map(|c| c.to_string()).collect()).unwrap();
    DataLoader::new(ds, 4)
        .sampler(DistributedSampler::new(n as usize, 1, 0).unwrap())
        .num_workers(0)
}

/// `EPOCHS` epochs of the MNIST CNN (Adam, lr 0.01) on random data under `schedule`; returns
/// the report and the optimizer's final rate and momentum (beta1).
fn fit(
    out: &Path,
    schedule: Option<Box<dyn LrSchedule>>,
    policy: Policy,
    model_seed: i64,
    resume: bool,
) -> trainbook::Result<(FitReport, f64, Option<f64>)> {
    let cfg = FitConfig { policy, resume, schedule, ..Default::default() };
    fit_with(out, cfg, model_seed)
}

/// As [`fit`], with the run's other settings from `cfg` (its epochs, output folder and progress
/// set here).
fn fit_with(
    out: &Path,
    cfg: FitConfig,
    model_seed: i64,
) -> trainbook::Result<(FitReport, f64, Option<f64>)> {
    let dist = Dist::single(Device::Cpu);
    tch::manual_seed(model_seed);
    let mut vs = VarStore::new(Device::Cpu);
    let net = MnistNet::new(&vs.root());
    let mut opt = Optimizer::adam(&vs, 0.01);
    let (mut train, mut val) = (loader(1, SAMPLES), loader(2, 8));
    let cfg = FitConfig { epochs: EPOCHS, out: out.to_path_buf(), progress: false, ..cfg };
    tch::manual_seed(99); // the dropout stream; a resumed run restores it from the checkpoint
    let report =
        Trainer::with_config(&dist, cfg).fit(&mut vs, &net, &mut opt, &mut train, &mut val)?;
    Ok((report, opt.lr(), opt.momentum()))
}

fn no_checkpoints() -> Policy {
    Policy { every_epochs: None, every_steps: None, keep_last: 1, best: None }
}

/// Fits under each schedule and checks that every epoch's recorded rate (and the final rate)
/// is the standalone schedule's: per-epoch ones stepped with the epoch's validation results,
/// per-step ones `STEPS_PER_EPOCH` times per epoch.
fn fit_follows_the_standalone(name: &str, schedules: Vec<Box<dyn LrSchedule>>) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new(name);
    for (i, s) in schedules.into_iter().enumerate() {
        let (report, final_lr, final_momentum) =
            fit(&work.join(i.to_string()), Some(s.clone()), no_checkpoints(), 7, false).unwrap();
        assert_eq!(report.history.len(), EPOCHS as usize);
        let mut standalone = s.clone();
        let mut lr = standalone.start(0.01).unwrap();
        let mut want = Vec::new();
        for r in &report.history {
            match s.cadence() {
                Cadence::Epoch => {
                    want.push(lr);
                    let v = Validation {
                        loss: r.val_loss.unwrap(),
                        accuracy: r.val_acc.unwrap(),
                        monitored: None,
                    };
                    lr = standalone.advance(lr, Some(v)).unwrap();
                }
                Cadence::Step => {
                    for _ in 0..STEPS_PER_EPOCH {
                        lr = standalone.advance(lr, None).unwrap();
                    }
                    want.push(lr);
                }
            }
        }
        let got: Vec<f64> = report.history.iter().map(|r| r.lr).collect();
        assert_eq!(got, want, "{s:?}");
        assert_eq!(final_lr, lr, "{s:?}: the optimizer's rate at the end");
        // OneCycleLR and CyclicLR move Adam's beta1 (0.9 from Optimizer::adam) as torch's
        // cycle_momentum.
        let want_momentum = standalone.momentum().or(Some(0.9));
        assert_eq!(final_momentum, want_momentum, "{s:?}: the optimizer's momentum at the end");
        assert!(want.windows(2).any(|w| w[0] != w[1]), "{s:?} never changed the rate: {want:?}");
        println!("{}: {want:?}", s.name());
    }
}

#[test]
fn fit_follows_per_epoch_schedules() {
    let _turn = common::module_turn(module_path!());
    fit_follows_the_standalone(
        "schedules-epoch",
        vec![
            Box::new(StepLR::new(1, 0.5)),
            Box::new(CosineAnnealingLR::new(0.01, 2, 1e-4)),
            Box::new(LinearLR::new(0.25, 1.0, 2).stepping(Cadence::Epoch)),
            // An absolute threshold of 1.0 on the loss (which moves by less per epoch here):
            // only the first epoch improves, whatever the data and initialisation.
            Box::new(
                ReduceLROnPlateau::new(Mode::Min).patience(0).factor(0.5).threshold(1.0, false),
            ),
            // An absolute threshold of 1.0 on the accuracy (a fraction): only the first epoch
            // improves.
            Box::new(
                ReduceLROnPlateau::new(Mode::Max).patience(0).factor(0.5).threshold(1.0, false),
            ),
        ],
    );
}

#[test]
fn fit_follows_per_step_schedules() {
    let _turn = common::module_turn(module_path!());
    fit_follows_the_standalone(
        "schedules-step",
        vec![
            Box::new(OneCycleLR::new(0.02, EPOCHS * STEPS_PER_EPOCH as u64)),
            Box::new(CyclicLR::new(0.001, 0.02, 4).mode(CyclicMode::Triangular2)),
            Box::new(LinearLR::new(0.1, 1.0, 10)),
            Box::new(CosineAnnealingLR::new(0.01, 4, 0.0).stepping(Cadence::Step)),
            warmup_then_cosine(),
        ],
    );
}

/// The usual fine-tuning recipe: 4 warmup steps from a tenth of the rate, then a cosine decay.
fn warmup_then_cosine() -> Box<dyn LrSchedule> {
    let cosine = CosineAnnealingLR::new(0.01, 10, 1e-4).stepping(Cadence::Step);
    Box::new(SequentialLR::new(
        vec![Box::new(LinearLR::new(0.1, 1.0, 4)), Box::new(cosine)],
        vec![4],
    ))
}

fn manifest(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap()
}

#[test]
fn a_run_resumed_mid_epoch_follows_the_same_rates_and_weights() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new("schedules-resume");
    let every_step =
        Policy { every_epochs: None, every_steps: Some(2), keep_last: 100, best: None };
    let total = EPOCHS * STEPS_PER_EPOCH as u64;
    let schedules: Vec<Box<dyn LrSchedule>> = vec![
        Box::new(StepLR::new(1, 0.5)),
        Box::new(OneCycleLR::new(0.02, total)),
        warmup_then_cosine(),
    ];
    for s in schedules {
        let (whole, resumed) =
            (work.join(format!("{}-whole", s.name())), work.join(format!("{}-resumed", s.name())));
        let t = std::time::Instant::now();
        let (a, lr_a, momentum_a) =
            fit(&whole, Some(s.clone()), every_step.clone(), 7, false).unwrap();
        // Stopped after step 8: two batches into the second epoch, the schedule stepped.
        let step8 = "checkpoints/step-000000008";
        let saved = manifest(&whole.join(step8));
        assert_eq!((saved["epoch"].as_u64(), saved["batches_done"].as_u64()), (Some(1), Some(2)));
        let want_steps = if s.cadence() == Cadence::Step { 8 } else { 1 };
        assert_eq!(
            saved["parts"]["schedule"]["value"]["last_epoch"].as_u64(),
            Some(want_steps),
            "{saved}"
        );
        common::copy_dir(&whole.join(step8), &resumed.join(step8));
        // A model initialised differently on purpose: everything comes from the checkpoint.
        let (b, lr_b, momentum_b) =
            fit(&resumed, Some(s.clone()), every_step.clone(), 8, true).unwrap();
        assert_eq!(b.resumed_from.as_ref().map(|r| (r.1, r.2)), Some((1, 2)));
        assert_eq!(lr_a.to_bits(), lr_b.to_bits(), "{}: final rate", s.name());
        assert_eq!(momentum_a.map(f64::to_bits), momentum_b.map(f64::to_bits), "{}", s.name());
        let rates = |r: &FitReport| r.history.iter().map(|h| h.lr.to_bits()).collect::<Vec<_>>();
        // (The resumed run's log starts at its checkpoint's epoch: metrics.jsonl was not copied.)
        assert_eq!(
            rates(&a)[1..],
            rates(&b),
            "{}: the rates of the epochs after the stop",
            s.name()
        );
        let (wa, wb) = (
            common::sorted_tensors(&whole.join("model.safetensors")),
            common::sorted_tensors(&resumed.join("model.safetensors")),
        );
        assert!(!wa.is_empty());
        assert_eq!(
            common::max_abs_diff(&wa, &wb),
            0.0,
            "{}: the resumed run left the trajectory",
            s.name()
        );
        println!("{}: two runs in {:.1} s", s.name(), t.elapsed().as_secs_f64());
        let last = format!("checkpoints/step-{total:09}");
        assert_eq!(
            manifest(&whole.join(&last))["parts"]["schedule"]["value"],
            manifest(&resumed.join(&last))["parts"]["schedule"]["value"]
        );
    }
}

#[test]
fn bad_schedule_arguments_are_errors_of_fit() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new("schedules-bad");
    let expect = |r: trainbook::Result<(FitReport, f64, Option<f64>)>, param: &str| match r {
        Err(Error::InvalidArgument(m)) => assert!(m.contains(param), "{m}"),
        Err(e) => panic!("expected InvalidArgument naming {param}, got {e}"),
        Ok(_) => panic!("expected InvalidArgument naming {param}, fit succeeded"),
    };
    expect(
        fit(&work.join("a"), Some(Box::new(OneCycleLR::new(0.1, 0))), no_checkpoints(), 7, false),
        "total_steps",
    );
    expect(
        fit(&work.join("b"), Some(Box::new(StepLR::new(2, -0.1))), no_checkpoints(), 7, false),
        "gamma",
    );
    expect(
        fit(
            &work.join("c"),
            Some(Box::new(ReduceLROnPlateau::new(Mode::Min).factor(1.5))),
            no_checkpoints(),
            7,
            false,
        ),
        "factor",
    );
    // A cycle shorter than the run: torch's ValueError when stepped past total_steps.
    expect(
        fit(&work.join("d"), Some(Box::new(OneCycleLR::new(0.1, 10))), no_checkpoints(), 7, false),
        "total_steps",
    );
}

#[test]
fn the_builder_takes_any_schedule_and_keeps_plateau() {
    let _turn = common::module_turn(module_path!());
    let dist = Dist::single(Device::Cpu);
    let t = Trainer::new(&dist).schedule(OneCycleLR::new(0.1, 10));
    assert_eq!(t.config().schedule.as_ref().map(|s| s.name()), Some("OneCycleLR"));
    let t = t.plateau(ReduceLROnPlateau::new(Mode::Max));
    let s = t.clone().config().schedule.clone().unwrap();
    assert_eq!((s.name(), s.cadence()), ("ReduceLROnPlateau", Cadence::Epoch));
    assert!(format!("{t:?}").contains("ReduceLROnPlateau"));
}

#[test]
fn composite_schedules_refuse_what_torch_refuses_and_restore_their_parts() {
    let _turn = common::module_turn(module_path!());
    let invalid = |mut s: Box<dyn LrSchedule>, what: &str| match s.start(0.1) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains(what), "{m}"),
        other => panic!("expected InvalidArgument naming {what}, got {other:?}"),
    };
    let warmup = || -> Box<dyn LrSchedule> { Box::new(LinearLR::new(0.1, 1.0, 3)) };
    let cosine = || -> Box<dyn LrSchedule> {
        Box::new(CosineAnnealingLR::new(0.1, 5, 0.0).stepping(Cadence::Step))
    };
    invalid(Box::new(SequentialLR::new(vec![warmup(), cosine()], vec![])), "milestones");
    invalid(
        Box::new(SequentialLR::new(vec![warmup(), cosine(), warmup()], vec![4, 2])),
        "increasing",
    );
    invalid(Box::new(SequentialLR::new(vec![], vec![])), "at least one");
    let plateau = Box::new(ReduceLROnPlateau::new(Mode::Min));
    invalid(Box::new(ChainedScheduler::new(vec![warmup(), plateau])), "ReduceLROnPlateau");
    let one_cycle = Box::new(OneCycleLR::new(0.1, 10));
    invalid(Box::new(SequentialLR::new(vec![warmup(), one_cycle], vec![3])), "OneCycleLR");
    let cyclic = Box::new(CyclicLR::new(0.01, 0.1, 2));
    invalid(Box::new(ChainedScheduler::new(vec![cosine(), cyclic])), "CyclicLR");
    // A per-epoch cosine after a per-step warmup: which steps would the milestone count?
    let per_epoch = Box::new(CosineAnnealingLR::new(0.1, 5, 0.0));
    invalid(Box::new(SequentialLR::new(vec![warmup(), per_epoch], vec![3])), "stepped like");

    // State: a copy restored mid-way continues identically; another composition is refused.
    let mut a = SequentialLR::new(vec![warmup(), cosine()], vec![3]);
    let mut lr = a.start(0.1).unwrap();
    for _ in 0..4 {
        lr = a.advance(lr, None).unwrap();
    }
    let mut b = SequentialLR::new(vec![warmup(), cosine()], vec![3]);
    b.load_state(&a.state()).unwrap();
    assert_eq!(b.steps(), 4);
    for _ in 0..3 {
        let (x, y) = (a.advance(lr, None).unwrap(), b.advance(lr, None).unwrap());
        assert_eq!(x.to_bits(), y.to_bits());
        lr = x;
    }
    let mut other = SequentialLR::new(vec![cosine(), warmup()], vec![3]);
    match other.load_state(&a.state()) {
        Err(Error::Checkpoint(m)) => assert!(m.contains("CosineAnnealingLR"), "{m}"),
        r => panic!("expected a Checkpoint error, got {r:?}"),
    }
    let mut moved = SequentialLR::new(vec![warmup(), cosine()], vec![5]);
    assert!(matches!(moved.load_state(&a.state()), Err(Error::Checkpoint(_))));
}

/// A per-epoch schedule that keeps the rate and records the validation results `fit` hands it.
#[derive(Clone, Debug, Default)]
struct Recorder(Arc<Mutex<Vec<Validation>>>, u64);

impl LrSchedule for Recorder {
    fn name(&self) -> &'static str {
        "Recorder"
    }
    fn cadence(&self) -> Cadence {
        Cadence::Epoch
    }
    fn validate(&self) -> trainbook::Result<()> {
        Ok(())
    }
    fn start(&mut self, lr: f64) -> trainbook::Result<f64> {
        Ok(lr)
    }
    fn advance(&mut self, lr: f64, v: Option<Validation>) -> trainbook::Result<f64> {
        self.0.lock().unwrap().push(v.expect("a per-epoch schedule gets the epoch's validation"));
        self.1 += 1;
        Ok(lr)
    }
    fn steps(&self) -> u64 {
        self.1
    }
    fn state(&self) -> Value {
        serde_json::json!({ "last_epoch": self.1 })
    }
    fn load_state(&mut self, state: &Value) -> trainbook::Result<()> {
        self.1 = state["last_epoch"].as_u64().unwrap_or(0);
        Ok(())
    }
    fn box_clone(&self) -> Box<dyn LrSchedule> {
        Box::new(self.clone())
    }
}

#[test]
fn a_per_epoch_schedule_gets_the_monitored_metric_with_the_loss_and_accuracy() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new("schedules-monitor");
    for monitor in [None, Some(Monitor::ValAcc), Some(Monitor::ValLoss)] {
        let seen = Recorder::default();
        let cfg = FitConfig {
            schedule: Some(Box::new(seen.clone())),
            policy: no_checkpoints(),
            monitor,
            ..Default::default()
        };
        let (report, _, _) = fit_with(&work.join(format!("{monitor:?}")), cfg, 7).unwrap();
        let seen = seen.0.lock().unwrap().clone();
        assert_eq!(seen.len(), report.history.len(), "one validation per epoch");
        for (v, r) in seen.iter().zip(&report.history) {
            let (loss, acc) = (r.val_loss.unwrap(), r.val_acc.unwrap());
            assert_eq!((v.loss.to_bits(), v.accuracy.to_bits()), (loss.to_bits(), acc.to_bits()));
            let want = match monitor {
                None => None,
                Some(Monitor::ValAcc) => Some(acc),
                _ => Some(loss),
            };
            assert_eq!(v.monitored.map(f64::to_bits), want.map(f64::to_bits), "{monitor:?}");
        }
    }
}
