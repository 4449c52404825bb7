//! `fit`'s checkpoints and resume. With gradient accumulation, checkpoints are written only at
//! the end of an accumulation window (and at the short window that ends an epoch), and a run
//! resumed from a mid-epoch checkpoint ends with exactly the weights of the uninterrupted run.
//! A finished run, resumed, trains nothing and leaves its files alone. In float16 the loss
//! scale is part of the checkpoint, so a resumed float16 run is exact too. `best/` holds the
//! epoch with the lowest validation loss in `Mode::Min` and the highest accuracy in `Mode::Max`.
//! Every part that keeps state is on in these runs (clipping, early stopping, EMA, step logs,
//! param groups with a per-step schedule per group, a top-k count, metrics of one's own for
//! validation and for training).
use crate::common;

use std::path::Path;

use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};
use trainbook::checkpoint::Policy;
use trainbook::data::{DataLoader, DistributedSampler, TensorDataset};
use trainbook::dist::Dist;
use trainbook::fit::{EarlyStopping, FitConfig, FitReport, Trainer};
use trainbook::models::MnistNet;
use trainbook::train::{
    CrossEntropyLoss, GradClip, LinearLR, Mode, Monitor, Optimizer, ParamGroup, Precision,
    SharedLoss,
};

/// libtorch's random generator is shared by the test threads and these runs are exact only
/// with its stream to themselves: one test at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

const SAMPLES: usize = 40; // 10 batches of 4 per epoch
const ACCUMULATE: usize = 3; // windows: batches 0-2, 3-5, 6-8 and the short 9

fn loader(seed: i64, n: usize) -> DataLoader<TensorDataset> {
    tch::manual_seed(seed);
    let x = Tensor::randn([n as i64, 1, 28, 28], (Kind::Float, Device::Cpu));
    let y = Tensor::randint(10, [n as i64], (Kind::Int64, Device::Cpu));
    let ds = TensorDataset::new(&x, &y, (0..10).map(|c| c.to_string()).collect()).unwrap();
    DataLoader::new(ds, 4).sampler(DistributedSampler::new(n, 1, 0).unwrap()).num_workers(0)
}

/// Two epochs of the MNIST CNN with accumulation 3 and a checkpoint after every optimizer step.
fn run(dist: &Dist, out: &Path, model_seed: i64, resume: bool) -> FitReport {
    run_in(dist, out, model_seed, resume, Precision::F32)
}

fn run_in(
    dist: &Dist,
    out: &Path,
    model_seed: i64,
    resume: bool,
    precision: Precision,
) -> FitReport {
    run_with(
        dist,
        out,
        model_seed,
        resume,
        Policy { every_epochs: None, every_steps: Some(1), keep_last: 100, best: None },
        precision,
    )
}

fn run_with(
    dist: &Dist,
    out: &Path,
    model_seed: i64,
    resume: bool,
    policy: Policy,
    precision: Precision,
) -> FitReport {
    tch::manual_seed(model_seed);
    let mut vs = VarStore::new(Device::Cpu);
    let net = MnistNet::new(&vs.root());
    // Param groups on (no weight decay on biases, a faster head), with a per-step warmup run
    // on each group's own rate: the groups' rates and schedules in every checkpoint.
    let mut opt = Optimizer::adamw(&vs, 1e-3)
        .param_group(ParamGroup::norm_and_bias())
        .unwrap()
        .param_group(ParamGroup::prefix("fc2.").lr(3e-3))
        .unwrap();
    let (mut train, mut val) = (loader(1, SAMPLES), loader(2, 8));
    let cfg = FitConfig {
        epochs: 2,
        out: out.to_path_buf(),
        policy,
        resume,
        requeue: false,
        schedule: Some(Box::new(LinearLR::new(0.5, 1.0, 6))),
        seed: 0,
        config: serde_json::Value::Null,
        progress: false,
        accumulate: ACCUMULATE,
        ddp: Default::default(),
        precision,
        channels_last: false,
        loss: SharedLoss::new(CrossEntropyLoss::new()),
        // A top-2 count on: the resumed epoch continues it from the checkpoint's sums.
        top_k: Some(2),
        pin_memory: true,
        use_distributed_sampler: true,
        // Clipping on (an active bound), so resumed runs are checked with it too.
        clip_grad: Some(GradClip::norm(1.0)),
        // Early stopping on (its state in every checkpoint), never triggered in 2 epochs.
        early_stopping: Some(EarlyStopping::new(Monitor::ValLoss, 100)),
        monitor: None,
        restore_best: false,
        freeze_backbone_epochs: 0,
        // An EMA of the weights on: its state in every checkpoint.
        ema: Some(0.9),
        ema_cadence: None,
        // The step logs on: a resumed run rewrites the steps after its checkpoint.
        step_log: true,
        // The weight trail on: a resumed run keeps its lines up to the checkpoint's step.
        weight_trail: Some(1),
        limit_train_batches: None,
        limit_val_batches: None,
        max_steps: None,
        max_time: None,
        fast_dev_run: None,
        callbacks: Default::default(),
        // A metric of one's own on: its values in the resumed run's records too.
        metrics: vec![std::sync::Arc::new(trainbook::train::MulticlassScore::f1(10))],
        // A training metric of one's own on: its sums continue from the checkpoint, and each
        // step's value is a column of steps.csv.
        train_metrics: vec![std::sync::Arc::new(Confidence)],
        // Mid-epoch validations on (after steps 3 and 6): a resumed run redoes those after
        // its checkpoint, the same.
        val_every_steps: Some(3),
        detect_anomaly: false,
        overfit_batches: None,
        // CUDA graphs asked for: on the CPU (and with accumulation) the step runs eagerly, the
        // same.
        cuda_graphs: true,
        cudnn_benchmark: false,
        float32_matmul_precision: Some(trainbook::train::Float32MatmulPrecision::Highest),
        // A profiler recording steps 2-3 of each run (the resumed one counts from its start):
        // the trace changes nothing in the run.
        profile: Some(trainbook::train::ProfileSchedule::new(1, 1, 2).unwrap()),
        emit_nvtx: false,
        // MixUp or CutMix on every training batch: the same draws after the resume.
        mixup_cutmix: Some((0.2, 1.0)),
    };
    tch::manual_seed(99); // the dropout stream; a resumed run restores it from the checkpoint
    Trainer::with_config(dist, cfg).fit(&mut vs, &net, &mut opt, &mut train, &mut val).unwrap()
}

/// The mean of the highest softmax probability: float sums (not counts), whatever the targets
/// (MixUp's are mixed), so a resumed epoch equals the uninterrupted one only by continuing its
/// sums from the checkpoint in the same order.
struct Confidence;

impl trainbook::train::Metric for Confidence {
    fn name(&self) -> &str {
        "confidence"
    }
    fn mode(&self) -> Mode {
        Mode::Max
    }
    fn sums_len(&self) -> usize {
        2
    }
    fn batch_sums(&self, output: &Tensor, _target: &Tensor) -> Tensor {
        let top = output.softmax(1, Kind::Double).amax(1, false).sum(Kind::Double);
        let n = Tensor::from(output.size()[0] as f64).to_device(output.device());
        Tensor::stack(&[top, n], 0)
    }
    fn compute(&self, sums: &[f64]) -> f64 {
        sums[0] / sums[1]
    }
}

/// (directory name, epoch, batches_done, global_step) of every `step-*` checkpoint, by step.
fn checkpoints(out: &Path) -> Vec<(String, u64, u64, u64)> {
    let mut found: Vec<_> = std::fs::read_dir(out.join("checkpoints"))
        .unwrap()
        .filter_map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            let manifest = std::fs::read_to_string(e.path().join("manifest.json")).ok()?;
            let m: serde_json::Value = serde_json::from_str(&manifest).unwrap();
            Some((
                name,
                m["epoch"].as_u64().unwrap(),
                m["batches_done"].as_u64().unwrap(),
                m["global_step"].as_u64().unwrap(),
            ))
        })
        .collect();
    found.sort_by_key(|c| c.3);
    found
}

/// The checkpoint in `dir` (after 2 optimizer steps) holds each param group's rate and
/// schedule: after 2 of LinearLR's 6 steps from half the rate, 0.5 + 2 * 0.5 / 6 of it.
fn assert_groups_saved(dir: &Path) {
    let text = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
    let m: serde_json::Value = serde_json::from_str(&text).unwrap();
    let lrs: Vec<f64> = serde_json::from_value(m["optimizer"]["group_lrs"].clone()).unwrap();
    let factor = 0.5 + 2.0 * 0.5 / 6.0;
    assert_eq!(lrs.len(), 3, "{lrs:?}");
    for (lr, base) in lrs.iter().zip([1e-3, 1e-3, 3e-3]) {
        assert!((lr - base * factor).abs() <= 1e-15, "{lrs:?}");
    }
    assert_eq!(
        m["parts"]["schedule"]["value"].as_array().map(Vec::len),
        Some(3),
        "{}",
        m["parts"]["schedule"]["value"]
    );
}

#[test]
fn checkpoints_fall_on_window_ends_and_resume_is_exact() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dist = Dist::init().unwrap();
    assert_eq!(dist.world_size(), 1, "run without a launcher's environment");
    let work = common::WorkDir::new("accumulation");
    let (whole, resumed) = (work.join("uninterrupted"), work.join("resumed"));

    run(&dist, &whole, 7, false);
    // The profiler's one cycle (steps 2-3): one trace, rank 0's.
    let traces: Vec<String> = std::fs::read_dir(whole.join(trainbook::fit::PROFILE_DIR))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        traces.len() == 1
            && traces[0].starts_with("rank0.")
            && traces[0].ends_with(".pt.trace.json"),
        "{traces:?}"
    );
    let found = checkpoints(&whole);
    let positions: Vec<(u64, u64, u64)> = found.iter().map(|c| (c.1, c.2, c.3)).collect();
    // 4 optimizer steps per epoch: after batches 3, 6, 9 and the one-batch window ending at 10.
    assert_eq!(
        positions,
        [(0, 3, 1), (0, 6, 2), (0, 9, 3), (0, 10, 4), (1, 3, 5), (1, 6, 6), (1, 9, 7), (1, 10, 8)]
    );

    // A run that stopped after its second optimizer step (6 of 10 batches into epoch 0)
    // restarts from that checkpoint, with a model initialised differently on purpose.
    let (name, ..) = found.iter().find(|c| c.3 == 2).unwrap();
    assert_groups_saved(&whole.join("checkpoints").join(name));
    common::copy_dir(
        &whole.join("checkpoints").join(name),
        &resumed.join("checkpoints").join(name),
    );
    // The interrupted run's step log went on past its checkpoint (here: with wrong losses, so
    // that a row left in place would show).
    let whole_steps = std::fs::read_to_string(whole.join("steps.csv")).unwrap();
    let garbled: String = whole_steps
        .lines()
        .map(|l| {
            let mut fields: Vec<&str> = l.split(',').collect();
            if fields[0].parse::<u64>().is_ok_and(|s| s > 2) {
                fields[3] = "999"; // the loss
            }
            fields.join(",") + "\n"
        })
        .collect();
    std::fs::write(resumed.join("steps.csv"), garbled + "9,1,3,0.5").unwrap();
    // And its mid-epoch validation after step 3 (here: a wrong one), past the checkpoint too.
    std::fs::write(resumed.join("val_steps.jsonl"), "{\"epoch\":0,\"step\":3,\"val_loss\":999}\n")
        .unwrap();
    let report = run(&dist, &resumed, 8, true);
    let (_, epoch, batches) = report.resumed_from.expect("should resume");
    assert_eq!((epoch, batches), (0, 6));
    let (a, b) = (
        common::sorted_tensors(&whole.join("model.safetensors")),
        common::sorted_tensors(&resumed.join("model.safetensors")),
    );
    assert!(!a.is_empty());
    assert_eq!(
        common::max_abs_diff(&a, &b),
        0.0,
        "the resumed run left the uninterrupted trajectory"
    );
    let (a, b) = (
        common::sorted_tensors(&whole.join("model_ema.safetensors")),
        common::sorted_tensors(&resumed.join("model_ema.safetensors")),
    );
    assert!(!a.is_empty());
    assert_eq!(common::max_abs_diff(&a, &b), 0.0, "the EMA of the weights, resumed");
    // The epochs' figures, the resumed epoch's included (its sums, the top-2 count too, came
    // from the checkpoint), and the own metric's, read as the uninterrupted run's; times aside.
    let figures = |dir: &Path| -> Vec<_> {
        let records = trainbook::train::read_records(&dir.join("metrics.jsonl")).unwrap();
        let r = records.iter();
        r.map(|r| {
            let (f1, confidence) = (r.metric("val_f1_macro"), r.metric("train_confidence"));
            (r.train_loss, r.train_acc, r.train_top_k, r.val_loss, r.val_top_k, f1, confidence)
        })
        .collect()
    };
    let whole_figures = figures(&whole);
    assert!(
        whole_figures
            .iter()
            .all(|f| f.2.is_some() && f.4.is_some() && f.5.is_some() && f.6.is_some()),
        "{whole_figures:?}"
    );
    assert_eq!(figures(&resumed), whole_figures);
    let later: Vec<u64> = checkpoints(&resumed).iter().map(|c| c.3).collect();
    assert_eq!(later, [2, 3, 4, 5, 6, 7, 8], "the resumed run counts optimizer steps on");
    // steps.csv reads as the uninterrupted run's: every step once, the same values (the wall
    // time, last, aside).
    let without_time = |text: &str| -> Vec<String> {
        text.lines().map(|l| l.rsplit_once(',').map_or(l, |(row, _)| row).to_string()).collect()
    };
    let resumed_steps = std::fs::read_to_string(resumed.join("steps.csv")).unwrap();
    assert_eq!(without_time(&resumed_steps), without_time(&whole_steps));
    assert_eq!(whole_steps.lines().count(), 1 + 8, "a header and 8 optimizer steps");
    assert!(
        whole_steps.starts_with("step,epoch,batches_done,loss,lr,grad_norm,confidence,wall_time\n")
    );
    // The mid-epoch validations: after steps 3 and 6 (4 and 8 end epochs), the same values.
    let val_steps = |dir: &Path| std::fs::read_to_string(dir.join("val_steps.jsonl")).unwrap();
    let whole_val = val_steps(&whole);
    let steps: Vec<u64> = whole_val
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, [3, 6], "{whole_val}");
    assert_eq!(val_steps(&resumed), whole_val);
}

#[test]
fn a_finished_run_trains_nothing_and_keeps_its_files() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dist = Dist::init().unwrap();
    let work = common::WorkDir::new("finished-run");
    let out = work.join("run");
    let policy = Policy { every_epochs: Some(1), every_steps: None, keep_last: 2, best: None };
    let first = run_with(&dist, &out, 7, false, policy.clone(), Precision::F32);
    assert_eq!(first.history.len(), 2);
    let stamp = |name: &str| std::fs::metadata(out.join(name)).unwrap().modified().unwrap();
    let (model, log) = (stamp("model.safetensors"), stamp("metrics.jsonl"));

    let again = run_with(&dist, &out, 8, true, policy, Precision::F32);
    let (_, epoch, batches) = again.resumed_from.expect("the finished run's last checkpoint");
    assert_eq!((epoch, batches), (2, 0));
    assert_eq!(again.history.len(), 2, "the finished epochs, read back from metrics.jsonl");
    assert_eq!(again.history[1].train_loss, first.history[1].train_loss);
    assert_eq!(
        (stamp("model.safetensors"), stamp("metrics.jsonl")),
        (model, log),
        "a finished run's files must not be rewritten"
    );
}

#[test]
fn a_float16_run_resumes_exactly_with_its_loss_scale() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dist = Dist::init().unwrap();
    let work = common::WorkDir::new("f16-resume");
    let (whole, resumed) = (work.join("uninterrupted"), work.join("resumed"));
    run_in(&dist, &whole, 7, false, Precision::F16);
    let found = checkpoints(&whole);
    let scale_at = |dir: &Path, name: &str| -> f64 {
        let m: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("checkpoints").join(name).join("manifest.json"))
                .unwrap(),
        )
        .unwrap();
        m["parts"]["grad_scaler"]["value"]["scale"]
            .as_f64()
            .expect("a float16 checkpoint holds the loss scale")
    };
    let scales: Vec<f64> = found.iter().map(|c| scale_at(&whole, &c.0)).collect();
    // torch's default start (2^16), then halvings after inf/nan steps: powers of two.
    assert!(scales.iter().all(|s| *s <= 65536.0 && s.log2().fract() == 0.0), "scales {scales:?}");
    println!("loss scale after each step: {scales:?}");
    let (name, ..) = found.iter().find(|c| c.3 == 2).unwrap();
    assert_groups_saved(&whole.join("checkpoints").join(name));
    common::copy_dir(
        &whole.join("checkpoints").join(name),
        &resumed.join("checkpoints").join(name),
    );
    run_in(&dist, &resumed, 8, true, Precision::F16);
    let (a, b) = (
        common::sorted_tensors(&whole.join("model.safetensors")),
        common::sorted_tensors(&resumed.join("model.safetensors")),
    );
    assert_eq!(
        common::max_abs_diff(&a, &b),
        0.0,
        "the resumed float16 run left the uninterrupted trajectory"
    );
    let last = &found.last().unwrap().0;
    assert_eq!(
        scale_at(&resumed, last),
        scale_at(&whole, last),
        "the loss scale after the last step"
    );
}

#[test]
fn best_holds_the_lowest_loss_in_min_mode_and_the_highest_accuracy_in_max_mode() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dist = Dist::init().unwrap();
    let work = common::WorkDir::new("best-by-mode");
    for mode in [Mode::Min, Mode::Max] {
        let out = work.join(format!("{mode:?}"));
        let policy =
            Policy { every_epochs: None, every_steps: None, keep_last: 1, best: Some(mode) };
        let report = run_with(&dist, &out, 7, false, policy, Precision::F32);
        let val = |r: &trainbook::train::EpochRecord| match mode {
            Mode::Min => r.val_loss.unwrap(),
            Mode::Max => r.val_acc.unwrap(),
        };
        // The first epoch with the best value (a later tie is no improvement).
        let best = report
            .history
            .iter()
            .reduce(|a, b| match mode {
                Mode::Min if val(b) < val(a) => b,
                Mode::Max if val(b) > val(a) => b,
                _ => a,
            })
            .unwrap();
        let manifest: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(out.join("checkpoints/best/manifest.json")).unwrap(),
        )
        .unwrap();
        println!(
            "{mode:?}: val loss {:?}, val acc {:?}; best/ holds epoch {} ({})",
            report.history.iter().map(|r| r.val_loss.unwrap()).collect::<Vec<_>>(),
            report.history.iter().map(|r| r.val_acc.unwrap()).collect::<Vec<_>>(),
            manifest["epoch"],
            manifest["best_metric"]
        );
        assert_eq!(manifest["best_metric"].as_f64(), Some(val(best)), "{mode:?}: best/'s metric");
        assert_eq!(manifest["epoch"].as_u64(), Some(best.epoch + 1), "{mode:?}: best/'s epoch");
        let highest = report.history.iter().filter_map(|r| r.val_acc).fold(f64::MIN, f64::max);
        assert_eq!(report.best_val_acc, Some(highest), "{mode:?}: the report's best accuracy");
    }
}
