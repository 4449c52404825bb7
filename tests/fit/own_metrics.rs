//! Metrics of one's own in `Trainer::fit` (Lightning's `self.log` + `monitor=`): on 2 Gloo
//! thread ranks, a registered macro F1 is in every epoch's record and `metrics.jsonl` (with
//! its per-class values) and in TensorBoard; it equals the F1 of the epoch's confusion matrix
//! (gathered labels, another path) bit for bit; `best/` and early stopping judge by it; the
//! early-stopping wait on it is in the checkpoints, so a run continued from one stops where
//! the uninterrupted run does, with the same values; an unregistered monitor is an error
//! before any training. A training metric of one's own (`Trainer::train_metric`, here the
//! accuracy as sums) equals the built-in training accuracy of every epoch bit for bit over
//! the 2 ranks, and its per-step values (every rank's step records, rank 0's `steps.csv`
//! column) add up to the epoch's correct count exactly.
use crate::common;

use std::path::Path;
use std::sync::{Arc, Mutex};

use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};
use trainbook::checkpoint::Policy;
use trainbook::data::{DataLoader, TensorDataset};
use trainbook::fit::{Callback, EarlyStopping, FitReport, Trainer};
use trainbook::launch::spawn;
use trainbook::models::MnistNet;
use trainbook::train::{
    read_records, Metric, Mode, Monitor, MulticlassScore, Optimizer, StepRecord,
};

/// Both tests seed and draw from libtorch's global generator (the data, the model, the dropout
/// of the thread ranks): one at a time, or one perturbs the other's draws.
static SERIAL: Mutex<()> = Mutex::new(());

fn data(seed: i64, n: i64) -> Arc<TensorDataset> {
    tch::manual_seed(seed);
    let x = Tensor::randn([n, 1, 28, 28], (Kind::Float, Device::Cpu));
    let y = Tensor::randint(10, [n], (Kind::Int64, Device::Cpu));
    Arc::new(TensorDataset::new(&x, &y, (0..10).map(|c| c.to_string()).collect()).unwrap())
}

/// The training accuracy as a metric of one's own: the correct count and the sample count.
struct AccuracySums;

impl Metric for AccuracySums {
    fn name(&self) -> &str {
        "acc_sums"
    }
    fn mode(&self) -> Mode {
        Mode::Max
    }
    fn sums_len(&self) -> usize {
        2
    }
    fn batch_sums(&self, output: &Tensor, target: &Tensor) -> Tensor {
        let correct = output.argmax(1, false).eq_tensor(target).sum(Kind::Double);
        let n = Tensor::from(target.size()[0] as f64).to_device(output.device());
        Tensor::stack(&[correct, n], 0)
    }
    fn compute(&self, sums: &[f64]) -> f64 {
        sums[0] / sums[1]
    }
}

/// Every step record a rank's run delivered.
#[derive(Default)]
struct Steps(Vec<StepRecord>);

impl Callback for Steps {
    fn on_train_steps(&mut self, steps: &[StepRecord]) -> trainbook::Result<()> {
        self.0.extend_from_slice(steps);
        Ok(())
    }
}

/// `epochs` epochs on 2 thread ranks from the weights in `init`, `best/` and early stopping
/// (patience 2) by the validation macro F1, the accuracy as a training metric of one's own,
/// resuming from `out` when a checkpoint is there.
fn fit_on_two_ranks(out: &Path, init: &Path, epochs: u64) -> FitReport {
    fit_on_two_ranks_with_steps(out, init, epochs).0
}

/// [`fit_on_two_ranks`], and each rank's step records.
fn fit_on_two_ranks_with_steps(
    out: &Path,
    init: &Path,
    epochs: u64,
) -> (FitReport, Vec<Vec<StepRecord>>) {
    let (train, val) = (data(1, 40), data(2, 30));
    let runs = spawn(2, |dist| {
        let mut vs = VarStore::new(Device::Cpu);
        let net = MnistNet::new(&vs.root());
        trainbook::models::load_weights(&mut vs, init, true)?;
        let mut opt = Optimizer::sgd(&vs, 0.05, 0.9);
        let mut train = DataLoader::from_arc(train.clone(), 4).distributed(dist).num_workers(0);
        let mut val = DataLoader::from_arc(val.clone(), 4).distributed(dist).num_workers(0);
        let f1 = MulticlassScore::f1(10);
        let policy = Policy { every_epochs: Some(1), every_steps: None, keep_last: 1, best: None };
        let steps = Arc::new(Mutex::new(Steps::default()));
        let report = Trainer::new(dist)
            .epochs(epochs)
            .out(out)
            .progress(false)
            .policy(policy)
            .keep_best(Some(Mode::Max))
            .monitor(Monitor::of_metric(&f1))
            .early_stopping(EarlyStopping::new(Monitor::of_metric(&f1), 2))
            .metric(f1)
            .train_metric(AccuracySums)
            .callback(steps.clone())
            .fit(&mut vs, &net, &mut opt, &mut train, &mut val)?;
        let steps = std::mem::take(&mut steps.lock().unwrap().0);
        Ok((report, steps))
    })
    .unwrap();
    let (reports, steps): (Vec<FitReport>, Vec<Vec<StepRecord>>) = runs.into_iter().unzip();
    assert_eq!(f1s(&reports[0]), f1s(&reports[1]), "every rank reports the same");
    (reports.into_iter().next().unwrap(), steps)
}

fn f1s(report: &FitReport) -> Vec<f64> {
    report.history.iter().map(|r| r.metric("val_f1_macro").expect("val_f1_macro")).collect()
}

#[test]
fn an_own_metric_is_logged_and_judges_best_and_early_stopping_across_a_resume() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new("own-metrics");
    tch::manual_seed(3);
    let vs = VarStore::new(Device::Cpu);
    let _net = MnistNet::new(&vs.root());
    let init = work.join("init.safetensors");
    trainbook::models::save_safetensors(&vs, &init).unwrap();

    let (whole, steps) = fit_on_two_ranks_with_steps(&work.join("whole"), &init, 8);
    let f1 = f1s(&whole);
    assert_training_metric_adds_up(&whole, &steps, &work.join("whole/steps.csv"));
    // Early stopping's rule on the logged values: stop after 2 epochs without a higher F1.
    let (mut best, mut wait, mut stop) = (f64::NEG_INFINITY, 0, None);
    for (epoch, &v) in f1.iter().enumerate() {
        (best, wait) = if v > best { (v, 0) } else { (best, wait + 1) };
        if wait == 2 {
            stop = Some(epoch as u64);
            break;
        }
    }
    assert_eq!(whole.early_stopped, stop, "F1 per epoch {f1:?}");
    assert_eq!(whole.history.len(), stop.map_or(8, |e| e as usize + 1));
    let f1_metric = MulticlassScore::f1(10);
    assert_eq!(whole.best, Some((Monitor::of_metric(&f1_metric), best)), "best/ by the F1");

    // The last epoch's F1 from its confusion matrix (all ranks' labels gathered) is the same.
    let confusion = whole.confusion.as_ref().unwrap();
    let mut sums = vec![0.0; 30];
    for c in 0..10 {
        let tp = confusion.counts[c][c] as f64;
        sums[c] = tp;
        sums[10 + c] = (0..10).map(|r| confusion.counts[r][c] as f64).sum::<f64>() - tp;
        sums[20 + c] = confusion.counts[c].iter().map(|&n| n as f64).sum::<f64>() - tp;
    }
    assert_eq!(f1_metric.compute(&sums).to_bits(), f1.last().unwrap().to_bits());

    // On disk: metrics.jsonl has the values and the per-class ones; TensorBoard has the tag.
    let logged = read_records(&work.join("whole/metrics.jsonl")).unwrap();
    assert_eq!(logged, whole.history);
    let per_class = logged[0].own_metrics["val_f1_macro_per_class"].as_array().unwrap();
    assert_eq!(per_class.len(), 10);
    let events: Vec<u8> = std::fs::read_dir(work.join("whole/tb"))
        .unwrap()
        .flat_map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    let tag = b"epoch/val_f1_macro";
    assert!(events.windows(tag.len()).any(|w| w == tag), "TensorBoard has the F1");

    // Two epochs, then continued: the wait on the F1 came back from the checkpoint.
    let first = fit_on_two_ranks(&work.join("resumed"), &init, 2);
    assert_eq!(f1s(&first), f1[..2]);
    let rest = fit_on_two_ranks(&work.join("resumed"), &init, 8);
    assert!(rest.resumed_from.is_some());
    let bits = |v: Vec<f64>| v.into_iter().map(f64::to_bits).collect::<Vec<_>>();
    assert_eq!(bits(f1s(&rest)), bits(f1.clone()), "the same F1 every epoch");
    assert_eq!((rest.early_stopped, rest.best), (whole.early_stopped, whole.best));
}

/// The training metric `acc_sums` of every epoch is the built-in training accuracy, bit for
/// bit; each step's value (5 steps of 4 samples per rank and epoch) times 4 is that step's
/// correct count, and they add up over both ranks to the epoch's; rank 0's `steps.csv` has
/// the column, before `wall_time`, with rank 0's values.
fn assert_training_metric_adds_up(report: &FitReport, steps: &[Vec<StepRecord>], csv: &Path) {
    for r in &report.history {
        let own = r.metric("train_acc_sums").expect("train_acc_sums");
        assert_eq!(own.to_bits(), r.train_acc.to_bits(), "epoch {}", r.epoch);
        let epoch: Vec<&StepRecord> =
            steps.iter().flatten().filter(|s| s.epoch == r.epoch).collect();
        assert_eq!(epoch.len(), 10, "5 steps on each rank");
        let mut correct = 0.0;
        for s in epoch {
            assert_eq!(s.metrics.len(), 1);
            assert_eq!(s.metrics[0].0, "acc_sums");
            correct += s.metrics[0].1 * 4.0;
        }
        assert_eq!(correct / 40.0, r.train_acc, "epoch {}: the correct count", r.epoch);
    }
    let text = std::fs::read_to_string(csv).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("step,epoch,batches_done,loss,lr,grad_norm,acc_sums,wall_time"));
    let column: Vec<f64> = lines.map(|l| l.split(',').nth(6).unwrap().parse().unwrap()).collect();
    let rank0: Vec<f64> = steps[0].iter().map(|s| s.metrics[0].1).collect();
    assert_eq!(column, rank0, "steps.csv holds rank 0's values, read back exactly");
}

#[test]
fn a_monitor_of_an_unregistered_metric_is_an_error_before_training() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new("own-metrics-unregistered");
    let dist = trainbook::dist::Dist::single(Device::Cpu);
    let mut vs = VarStore::new(Device::Cpu);
    let net = MnistNet::new(&vs.root());
    let mut opt = Optimizer::sgd(&vs, 0.05, 0.9);
    let mut train = DataLoader::from_arc(data(1, 8), 4).num_workers(0);
    let mut val = DataLoader::from_arc(data(2, 8), 4).num_workers(0);
    let monitor: Monitor = "val_recall_weighted".parse().unwrap();
    let trainer = Trainer::new(&dist).out(work.join("run")).progress(false).monitor(monitor);
    let err = trainer.fit(&mut vs, &net, &mut opt, &mut train, &mut val).unwrap_err();
    assert!(err.to_string().contains("no metric \"recall_weighted\" is registered"), "{err}");
    assert!(!work.join("run/metrics.jsonl").exists(), "nothing trained");
    let twice = Trainer::new(&dist).metric(MulticlassScore::f1(10)).metric(MulticlassScore::f1(10));
    let err = twice.fit(&mut vs, &net, &mut opt, &mut train, &mut val).unwrap_err();
    assert!(err.to_string().contains("two metrics are named \"f1_macro\""), "{err}");
}
