//! `fit`'s step logs and callbacks: every optimizer step reaches `steps.csv`, the TensorBoard
//! event files under `tb/` and the user's callbacks, with no device read beyond those the run
//! makes without them (`train::host_reads`); the step losses add up exactly to the epoch's
//! loss; TensorBoard's own reader (the `tensorboard` package in the venv) reads the files back,
//! and after a resume it shows every step once (the new file's `SessionLog.START` purges what
//! the interrupted run logged after its checkpoint).
use crate::common;

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tch::nn::VarStore;
use tch::Device;
use trainbook::checkpoint::Policy;
use trainbook::data::{DataLoader, TensorDataset};
use trainbook::dist::Dist;
use trainbook::fit::{Callback, FitReport, FitStart, Trainer, STEPS_CSV_HEADER};
use trainbook::train::{host_reads, EpochRecord, Optimizer, StepRecord};

/// host_reads is one counter per process and libtorch's generator is shared: one run at a time.
static SERIAL: Mutex<()> = Mutex::new(());

const SAMPLES: i64 = 24; // 6 batches of 4 per epoch: 4 is a power of two, so loss * 4 / 4 is exact

fn loader(seed: i64) -> DataLoader<TensorDataset> {
    common::three_class_loader(seed, SAMPLES)
}

/// Everything a callback is told, in order.
#[derive(Default)]
struct Recorder {
    events: Vec<String>,
    steps: Vec<StepRecord>,
    epochs: Vec<EpochRecord>,
}

impl Callback for Recorder {
    fn on_fit_start(&mut self, s: &FitStart) -> trainbook::Result<()> {
        self.events.push(format!("start {} {} {}", s.first_epoch, s.steps_done, s.resumed));
        Ok(())
    }
    fn on_train_steps(&mut self, steps: &[StepRecord]) -> trainbook::Result<()> {
        self.steps.extend_from_slice(steps);
        Ok(())
    }
    fn on_train_epoch_end(
        &mut self,
        epoch: u64,
        _: &trainbook::train::EpochSummary,
        steps: u64,
    ) -> trainbook::Result<()> {
        self.events.push(format!("train end {epoch} {steps}"));
        Ok(())
    }
    fn on_validation_epoch_end(
        &mut self,
        epoch: u64,
        _: &trainbook::train::EpochSummary,
        _: u64,
    ) -> trainbook::Result<()> {
        self.events.push(format!("val end {epoch}"));
        Ok(())
    }
    fn on_epoch_end(&mut self, record: &EpochRecord, _: u64) -> trainbook::Result<()> {
        self.epochs.push(record.clone());
        Ok(())
    }
    fn on_checkpoint_saved(&mut self, dir: &Path) -> trainbook::Result<()> {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        self.events.push(format!("saved {name}"));
        Ok(())
    }
    fn on_fit_end(&mut self, r: &FitReport) -> trainbook::Result<()> {
        self.events.push(format!("end {}", r.history.len()));
        Ok(())
    }
}

/// Two epochs of a linear model; returns the report and the host reads the run made.
fn train(
    out: &Path,
    step_log: bool,
    recorder: Option<Arc<Mutex<Recorder>>>,
    resume: bool,
    policy: Policy,
) -> (FitReport, u64) {
    let dist = Dist::single(Device::Cpu);
    tch::manual_seed(3);
    let mut vs = VarStore::new(Device::Cpu);
    let net = common::linear_classifier(&vs);
    let mut opt = Optimizer::sgd(&vs, 0.05, 0.9);
    let (mut tr, mut va) = (loader(1), loader(2));
    let mut trainer = Trainer::new(&dist)
        .epochs(2)
        .out(out)
        .resume(resume)
        .progress(false)
        .policy(policy)
        .step_log(step_log);
    if let Some(r) = recorder {
        trainer = trainer.callback(r);
    }
    let before = host_reads();
    let report = trainer.fit(&mut vs, &net, &mut opt, &mut tr, &mut va).unwrap();
    (report, host_reads() - before)
}

fn no_checkpoints() -> Policy {
    Policy { every_epochs: None, every_steps: None, keep_last: 1, best: None }
}

#[test]
fn every_step_is_logged_without_a_device_read_of_its_own() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new("step-logs");
    let (_, reads_off) = train(&work.join("off"), false, None, false, no_checkpoints());
    let recorder = Arc::new(Mutex::new(Recorder::default()));
    let out = work.join("on");
    let (report, reads_on) = train(&out, true, Some(recorder.clone()), false, no_checkpoints());
    assert_eq!(reads_on, reads_off, "the step logs and callbacks add no device read");
    assert!(!work.join("off").join("steps.csv").exists() && !work.join("off/tb").exists());

    let r = recorder.lock().unwrap();
    let numbers: Vec<u64> = r.steps.iter().map(|s| s.step).collect();
    assert_eq!(numbers, (1..=12).collect::<Vec<_>>(), "6 steps per epoch, numbered on");
    assert_eq!(
        r.events,
        ["start 0 0 false", "train end 0 6", "val end 0", "train end 1 12", "val end 1", "end 2"]
    );
    assert_eq!(r.epochs, report.history, "on_epoch_end gets metrics.jsonl's records");
    // Each epoch's loss is the mean over its samples of the step losses (batches of 4).
    for (epoch, record) in report.history.iter().enumerate() {
        let sum: f64 =
            r.steps.iter().filter(|s| s.epoch == epoch as u64).map(|s| s.loss * 4.0).sum();
        assert_eq!(sum / SAMPLES as f64, record.train_loss, "epoch {epoch}");
    }
    assert!(r.steps.iter().all(|s| s.lr == 0.05 && s.grad_norm.is_none()));
    // On the CPU the records hold no GPU memory peaks (their keys are left out of the file).
    assert!(report.history.iter().all(|h| h.max_memory_allocated.is_empty()));
    assert!(report.history.iter().all(|h| h.max_memory_reserved.is_empty()));

    // steps.csv holds the same records.
    let csv = std::fs::read_to_string(out.join("steps.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some(STEPS_CSV_HEADER));
    let losses: Vec<f64> = lines.map(|l| l.split(',').nth(3).unwrap().parse().unwrap()).collect();
    assert_eq!(losses, r.steps.iter().map(|s| s.loss).collect::<Vec<_>>());
}

/// TensorBoard's reader over `tb`: `{tag: [[step, value], ...]}`.
fn tensorboard_scalars(tb: &Path) -> serde_json::Value {
    let script = r#"
import json, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
acc = EventAccumulator(sys.argv[1], purge_orphaned_data=True)
acc.Reload()
print(json.dumps({t: [[e.step, e.value] for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}))
"#;
    let mut cmd = Command::new(common::venv_bin("python"));
    cmd.arg("-c").arg(script).arg(tb);
    let out = common::run_with_deadline(&mut cmd, Duration::from_secs(120), "tensorboard reader");
    assert!(out.status.success(), "{}", common::text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn tensorboard_reads_the_events_back_and_a_resume_purges_the_steps_it_retrains() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new("step-logs-tb");
    let every_step =
        Policy { every_epochs: None, every_steps: Some(1), keep_last: 100, best: None };
    let whole = work.join("whole");
    let recorder = Arc::new(Mutex::new(Recorder::default()));
    let (report, _) = train(&whole, true, Some(recorder.clone()), false, every_step.clone());
    let scalars = tensorboard_scalars(&whole.join("tb"));
    let steps = recorder.lock().unwrap().steps.clone();
    let logged: Vec<(u64, f32)> = scalars["step/loss"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_u64().unwrap(), p[1].as_f64().unwrap() as f32))
        .collect();
    let expected: Vec<(u64, f32)> = steps.iter().map(|s| (s.step, s.loss as f32)).collect();
    assert_eq!(logged, expected, "TensorBoard's scalars are the step losses (as float32)");
    let val_acc: Vec<(u64, f32)> = scalars["epoch/val_acc"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_u64().unwrap(), p[1].as_f64().unwrap() as f32))
        .collect();
    let expected: Vec<(u64, f32)> =
        report.history.iter().map(|r| (6 * (r.epoch + 1), r.val_acc.unwrap() as f32)).collect();
    assert_eq!(val_acc, expected, "one point per epoch, at the epoch's last step");
    let saved =
        recorder.lock().unwrap().events.iter().filter(|e| e.starts_with("saved step-")).count();
    assert_eq!(saved, 12, "on_checkpoint_saved for every step checkpoint");

    // An interrupted run (its checkpoint of step 3 and its whole event file) resumed: every
    // step appears once in TensorBoard, with the resumed run's values (equal to the whole run's).
    let resumed = work.join("resumed");
    let ckpt = whole.join("checkpoints/step-000000003");
    std::fs::create_dir_all(resumed.join("checkpoints/step-000000003")).unwrap();
    for e in std::fs::read_dir(&ckpt).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), resumed.join("checkpoints/step-000000003").join(e.file_name()))
            .unwrap();
    }
    std::fs::create_dir_all(resumed.join("tb")).unwrap();
    for e in std::fs::read_dir(whole.join("tb")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), resumed.join("tb").join(e.file_name())).unwrap();
    }
    std::thread::sleep(Duration::from_millis(1100)); // a later file name (seconds in the name)
    let again = Arc::new(Mutex::new(Recorder::default()));
    train(&resumed, true, Some(again.clone()), true, every_step);
    assert_eq!(again.lock().unwrap().events[0], "start 0 3 true");
    let after = tensorboard_scalars(&resumed.join("tb"));
    let steps_seen: Vec<u64> =
        after["step/loss"].as_array().unwrap().iter().map(|p| p[0].as_u64().unwrap()).collect();
    assert_eq!(steps_seen, (1..=12).collect::<Vec<_>>(), "each step once after the resume");
    assert_eq!(
        after["step/loss"], scalars["step/loss"],
        "the resumed run's values are the whole run's"
    );
}

#[test]
fn live_curves_follow_the_run() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new("live-curves");
    let dist = Dist::single(Device::Cpu);
    tch::manual_seed(3);
    let mut vs = VarStore::new(Device::Cpu);
    let net = common::linear_classifier(&vs);
    let mut opt = Optimizer::sgd(&vs, 0.05, 0.9);
    let (mut tr, mut va) = (loader(1), loader(2));
    let live = Arc::new(Mutex::new(trainbook::fit::LiveCurves::every(1)));
    let report = Trainer::new(&dist)
        .epochs(2)
        .out(&*work)
        .resume(false)
        .progress(false)
        .policy(no_checkpoints())
        .step_log(false)
        .callback(live.clone())
        .fit(&mut vs, &net, &mut opt, &mut tr, &mut va)
        .unwrap();
    assert_eq!(live.lock().unwrap().history(), report.history.as_slice());
    assert!(work.join("curves.png").exists());
}
