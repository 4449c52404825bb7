//! The profiler (`trainbook::train::Profiler`, `Trainer::profile`): its schedule is torch's
//! (tests/oracle/profiler.py asks `torch.profiler.schedule`), its traces hold exactly the steps
//! the schedule selects with the loop's phases and one's own ranges, a profiled run trains the
//! same weights bit for bit, c10d's all-reduce shows inside the backward pass on 2 Gloo ranks,
//! and misuse is an error naming what is wrong.
use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use crate::common::ranks::run_ranks;
use tch::nn::{Module, OptimizerConfig, VarStore};
use tch::{Device, Kind, Tensor};
use trainbook::dist::Dist;
use trainbook::fit::Trainer;
use trainbook::models::MnistNet;
use trainbook::train::{
    emit_nvtx, is_profiler_enabled, phase, record_function, train_epoch, EpochOptions, Optimizer,
    ProfileSchedule, Profiler, ProfilerAction,
};

/// A profiler is the thread's, and a fit's switches are process-wide: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// The names of a Chrome trace's complete events ("ph": "X"), in file order.
fn event_names(trace: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(trace).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .filter_map(|e| e["name"].as_str().map(str::to_string))
        .collect()
}

fn count(names: &[String], name: &str) -> usize {
    names.iter().filter(|n| *n == name).count()
}

fn steps_in(names: &[String]) -> Vec<String> {
    names.iter().filter(|n| n.starts_with("ProfilerStep#")).cloned().collect()
}

#[test]
fn the_schedule_is_torchs() {
    let _turn = common::module_turn(module_path!());
    let combos = [
        (1, 1, 2, 1, 0),
        (0, 0, 1, 0, 0),
        (2, 1, 3, 0, 0),
        (2, 1, 3, 2, 5),
        (0, 2, 1, 3, 1),
        (3, 0, 2, 1, 2),
    ];
    let arg = serde_json::to_string(&combos).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/profiler.py");
    let out =
        Command::new(common::venv_bin("python")).arg(script).args([&arg, "30"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let torch: Vec<Vec<String>> = serde_json::from_slice(&out.stdout).unwrap();
    for ((wait, warmup, active, repeat, skip_first), theirs) in combos.iter().zip(&torch) {
        let s = ProfileSchedule::new(*wait, *warmup, *active)
            .unwrap()
            .repeat(*repeat)
            .skip_first(*skip_first);
        let ours: Vec<String> = (0..30)
            .map(|step| match s.action(step) {
                ProfilerAction::None => "NONE",
                ProfilerAction::Warmup => "WARMUP",
                ProfilerAction::Record => "RECORD",
                ProfilerAction::RecordAndSave => "RECORD_AND_SAVE",
            })
            .map(str::to_string)
            .collect();
        assert_eq!(&ours, theirs, "{s:?}");
    }
}

#[test]
fn a_loop_of_ones_own_records_the_scheduled_steps_with_its_ranges() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new("profiler-own-loop");
    let vs = VarStore::new(Device::Cpu);
    let net = tch::nn::linear(vs.root(), 8, 3, Default::default());
    let mut sgd = tch::nn::Sgd::default().build(&vs, 0.1).unwrap();
    let mut prof = Profiler::new(work.join("traces"), ProfileSchedule::new(1, 1, 2).unwrap())
        .unwrap()
        .record_shapes(true)
        .worker_name("mine");
    prof.start().unwrap();
    let mut recording = Vec::new();
    for _ in 0..6 {
        recording.push(is_profiler_enabled());
        let _range = record_function("my_part").unwrap();
        let x = Tensor::randn([4, 8], (Kind::Float, Device::Cpu));
        let loss = net.forward(&x).square().mean(None);
        sgd.backward_step(&loss);
        drop(_range);
        prof.step().unwrap();
    }
    // torch's schedule(wait=1, warmup=1, active=2): steps 2 and 3 recorded, saved after step 3.
    assert_eq!(recording, [false, false, true, true, false, false]);
    let traces = prof.stop().unwrap();
    assert_eq!(traces.len(), 1, "{traces:?}");
    let file = traces[0].file_name().unwrap().to_str().unwrap();
    let stamp = file.strip_prefix("mine.").and_then(|f| f.strip_suffix(".pt.trace.json"));
    assert!(stamp.is_some_and(|s| s.parse::<u128>().is_ok()), "torch's file-name scheme: {file}");
    let names = event_names(&traces[0]);
    assert_eq!(steps_in(&names), ["ProfilerStep#2", "ProfilerStep#3"]);
    assert_eq!(count(&names, "my_part"), 2);
    assert!(count(&names, "aten::addmm") >= 2, "the operators inside: {names:?}");
    assert!(!is_profiler_enabled());
    assert!(prof.stop().unwrap().len() == 1, "stopping twice does nothing more");
}

/// Trains an MnistNet for one epoch of 5 batches (4 pictures each) from seed 3, with `prof`.
fn mnist_epoch(prof: Option<&std::cell::RefCell<Profiler>>) -> Vec<(String, Tensor)> {
    let vs = VarStore::new(Device::Cpu);
    tch::manual_seed(3);
    let net = MnistNet::new(&vs.root());
    let mut opt = Optimizer::sgd(&vs, 0.05, 0.9);
    let mut loader = common::random_mnist_loader(4, 20);
    let mut opts = EpochOptions::on(Device::Cpu).quiet();
    if let Some(p) = prof {
        opts = opts.profiler(p);
    }
    train_epoch(&net, &mut loader, &mut opt, &trainbook::train::CrossEntropyLoss::new(), &opts)
        .unwrap();
    let mut out: Vec<_> = vs.variables().into_iter().collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn an_epoch_shows_its_phases_in_each_recorded_step_and_trains_the_same() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new("profiler-epoch");
    let plain = mnist_epoch(None);
    let schedule = ProfileSchedule::new(0, 1, 2).unwrap(); // warm-up 0, record 1 and 2
    let prof = std::cell::RefCell::new(Profiler::new(work.join("p"), schedule).unwrap());
    let profiled = mnist_epoch(Some(&prof));
    let traces = prof.borrow_mut().stop().unwrap();
    assert_eq!(common::max_abs_diff(&plain, &profiled), 0.0, "the profiler changed the run");
    assert_eq!(traces.len(), 1);
    let names = event_names(&traces[0]);
    assert_eq!(steps_in(&names), ["ProfilerStep#1", "ProfilerStep#2"]);
    for name in [phase::DATA_WAIT, phase::FORWARD, phase::BACKWARD, phase::OPTIMIZER_STEP] {
        assert_eq!(count(&names, name), 2, "{name} once per recorded step: {names:?}");
    }
    assert_eq!(count(&names, phase::GRAPH_REPLAY), 0, "no CUDA graph on the CPU");
    assert!(count(&names, "aten::convolution") >= 2, "{names:?}");
}

fn fit_mnist(trainer: Trainer, seed: i64) -> trainbook::Result<Vec<(String, Tensor)>> {
    let mut vs = VarStore::new(Device::Cpu);
    tch::manual_seed(seed);
    let net = MnistNet::new(&vs.root());
    let mut opt = Optimizer::sgd(&vs, 0.05, 0.9);
    let (mut train, mut val) =
        (common::random_mnist_loader(1, 16), common::random_mnist_loader(2, 8));
    trainer.progress(false).fit(&mut vs, &net, &mut opt, &mut train, &mut val)?;
    let mut out: Vec<_> = vs.variables().into_iter().collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

fn traces_in(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(entries) => entries.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    };
    out.sort();
    out
}

#[test]
fn fit_writes_rank_traces_and_trains_the_same_weights() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new("profiler-fit");
    let dist = Dist::single(Device::Cpu);
    let plain = fit_mnist(Trainer::new(&dist).out(work.join("plain")).epochs(2), 5).unwrap();
    // 4 steps an epoch: steps 3-5 recorded (wait 1, warm-up 2), across the epochs' boundary.
    let schedule = ProfileSchedule::new(1, 2, 3).unwrap();
    let trainer = Trainer::new(&dist).out(work.join("profiled")).epochs(2).profile(schedule);
    let profiled = fit_mnist(trainer, 5).unwrap();
    assert_eq!(common::max_abs_diff(&plain, &profiled), 0.0, "the profiler changed the run");
    assert!(traces_in(&work.join("plain/profile")).is_empty());
    let traces = traces_in(&work.join("profiled").join(trainbook::fit::PROFILE_DIR));
    assert_eq!(traces.len(), 1, "{traces:?}");
    assert!(traces[0].file_name().unwrap().to_str().unwrap().starts_with("rank0."));
    let names = event_names(&traces[0]);
    assert_eq!(steps_in(&names), ["ProfilerStep#3", "ProfilerStep#4", "ProfilerStep#5"]);
    // Step 3 ends epoch 0: its validation (2 batches) and checkpoint fall in ProfilerStep#4.
    assert_eq!(count(&names, phase::EVAL_STEP), 2, "{names:?}");
    assert!(count(&names, phase::CHECKPOINT_COPY) >= 1, "{names:?}");
    assert_eq!(count(&names, phase::FORWARD), 3);
}

#[test]
fn misuse_is_an_error_naming_what_is_wrong() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new("profiler-misuse");
    let err = ProfileSchedule::new(1, 1, 0).unwrap_err().to_string();
    assert!(err.contains("active") && err.contains("at least 1"), "{err}");
    let mut prof = Profiler::new(work.join("p"), 2.into()).unwrap();
    let err = prof.step().unwrap_err().to_string();
    assert!(err.contains("before Profiler::start"), "{err}");
    prof.start().unwrap();
    assert!(prof.start().unwrap_err().to_string().contains("already started"));
    assert!(prof.stop().unwrap().is_empty(), "stopped in its idle step: nothing recorded");
    let err = record_function("a\0b").err().unwrap().to_string();
    assert!(err.contains("NUL"), "{err}");

    let dist = Dist::single(Device::Cpu);
    let err = fit_mnist(Trainer::new(&dist).out(work.join("zero")).profile(0), 1).unwrap_err();
    assert!(err.to_string().contains("active"), "{err}");
    let both = Trainer::new(&dist).out(work.join("both")).profile(1).emit_nvtx(true);
    let err = fit_mnist(both, 1).unwrap_err().to_string();
    assert!(err.contains("profile and emit_nvtx"), "{err}");
    assert!(!work.join("both/metrics.jsonl").exists(), "nothing trained");
    if !tch::utils::has_cuda() {
        // A libtorch without CUDA has no NVTX to emit to.
        let err = emit_nvtx().err().unwrap().to_string();
        assert!(err.contains("NVTX") && err.contains("CUDA"), "{err}");
        let err = fit_mnist(Trainer::new(&dist).out(work.join("nvtx")).emit_nvtx(true), 1)
            .unwrap_err()
            .to_string();
        assert!(err.contains("NVTX"), "{err}");
        assert!(!work.join("nvtx/metrics.jsonl").exists(), "nothing trained");
    }
    // A trace folder that cannot be made: the error names it when the trace is saved.
    std::fs::write(work.join("a-file"), "").unwrap();
    let mut prof =
        Profiler::new(work.join("a-file/traces"), ProfileSchedule::new(0, 0, 1).unwrap()).unwrap();
    prof.start().unwrap();
    let err = prof.step().unwrap_err().to_string();
    assert!(err.contains("a-file/traces"), "{err}");
    assert!(!is_profiler_enabled(), "stopped all the same");
}

/// A rank of the 2-rank test: one DDP epoch of an MnistNet on its shard, steps 1-2 recorded.
fn ddp_rank(out: &Path) {
    let dist = Dist::init().unwrap();
    let trainer =
        Trainer::new(&dist).out(out).epochs(1).profile(ProfileSchedule::new(0, 1, 2).unwrap());
    fit_mnist(trainer, 7).unwrap();
    dist.destroy().unwrap();
}

#[test]
#[ignore = "a rank of the tests below"]
fn rank_worker() {
    let _turn = common::module_turn(module_path!());
    let out = PathBuf::from(std::env::var("TB_OUT").unwrap_or_default());
    match std::env::var("TB_SCENARIO").as_deref() {
        Ok("ddp") => ddp_rank(&out),
        other => panic!("unknown scenario {other:?}"),
    }
}

#[test]
fn two_gloo_ranks_each_trace_the_all_reduce_inside_backward() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("profiler-ddp");
    run_ranks(module_path!(), "ddp", 2, &work);
    let traces = traces_in(&work.join("profile"));
    let names: Vec<String> =
        traces.iter().map(|t| t.file_name().unwrap().to_str().unwrap().to_string()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names[0].starts_with("rank0.") && names[1].starts_with("rank1."), "{names:?}");
    for t in &traces {
        let events = event_names(t);
        assert_eq!(steps_in(&events), ["ProfilerStep#1", "ProfilerStep#2"]);
        assert_eq!(count(&events, phase::BACKWARD), 2);
        // c10d's Reducer all-reduces the gradients' bucket from the backward pass: in each of
        // the two recorded steps, a `gloo:all_reduce` lies within `trainbook::backward`.
        let spans = |name: &str| -> Vec<(f64, f64)> {
            let text = std::fs::read_to_string(t).unwrap();
            let json: serde_json::Value = serde_json::from_str(&text).unwrap();
            let e = json["traceEvents"].as_array().unwrap().iter();
            e.filter(|e| e["ph"] == "X" && e["name"] == name)
                .map(|e| {
                    let ts = e["ts"].as_f64().unwrap();
                    (ts, ts + e["dur"].as_f64().unwrap())
                })
                .collect()
        };
        let inside = spans(phase::BACKWARD)
            .iter()
            .filter(|b| spans("gloo:all_reduce").iter().any(|a| b.0 <= a.0 && a.1 <= b.1))
            .count();
        assert_eq!(inside, 2, "c10d's all-reduce inside each backward in {}", t.display());
    }
}
