//! Every task's loss and metrics against torch and torchmetrics (tests/oracle/losses.py):
//! the losses equal torch's bit for bit (the same libtorch kernels, with and without
//! reduction); the metrics an evaluation reports over 2 Gloo thread ranks (37 samples, so the
//! DistributedSampler pads one, which must not count) equal torchmetrics' over the whole set:
//! counts exactly, ratios within float32 rounding (torchmetrics divides in float32). Also:
//! a model whose output does not fit the targets is an error naming both shapes, and a
//! closure is a loss.
use crate::common;

use std::sync::Arc;

use tch::nn::{ModuleT, VarStore};
use tch::{Device, Kind, Tensor};
use trainbook::data::{DataLoader, TensorDataset};
use trainbook::dist::Dist;
use trainbook::launch::spawn;
use trainbook::train::Ddp;
use trainbook::train::{
    evaluate, train_epoch, BCEWithLogitsLoss, CrossEntropyLoss, EpochOptions, HuberLoss, L1Loss,
    Loss, MSELoss, Optimizer, RunningMetrics, SmoothL1Loss, Task,
};

#[test]
fn the_losses_equal_torchs_bit_for_bit() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("losses");
    let oracle = common::oracle_tensors("losses.py", "losses", &work);
    let get = |name: &str| common::get(&oracle, name).shallow_clone();
    let (reg_out, reg_target) = (get("in.reg_out"), get("in.reg_target"));
    let (ml_logits, ml_target) = (get("in.ml_logits"), get("in.ml_target"));
    let (ce_logits, ce_labels) = (get("in.ce_logits"), get("in.ce_labels"));
    let pos_weight = Vec::<f32>::try_from(get("in.pos_weight")).unwrap();
    let class_weight = Vec::<f32>::try_from(get("in.ce_weight")).unwrap();
    let ce_ignored = get("in.ce_ignored");
    let cases: Vec<(&str, Box<dyn Loss>, &Tensor, &Tensor)> = vec![
        ("mse", Box::new(MSELoss), &reg_out, &reg_target),
        ("l1", Box::new(L1Loss), &reg_out, &reg_target),
        ("huber", Box::new(HuberLoss { delta: 0.7 }), &reg_out, &reg_target),
        ("smooth_l1", Box::new(SmoothL1Loss { beta: 0.6 }), &reg_out, &reg_target),
        (
            "bce",
            Box::new(BCEWithLogitsLoss { pos_weight: Some(pos_weight) }),
            &ml_logits,
            &ml_target,
        ),
        ("ce", Box::new(CrossEntropyLoss::new().label_smoothing(0.1)), &ce_logits, &ce_labels),
        (
            "ce_weight",
            Box::new(CrossEntropyLoss::new().weight(&class_weight)),
            &ce_logits,
            &ce_labels,
        ),
        (
            "ce_weight_ignore",
            Box::new(
                CrossEntropyLoss::new().weight(&class_weight).ignore_index(-1).label_smoothing(0.1),
            ),
            &ce_logits,
            &ce_ignored,
        ),
        ("ce_ignore", Box::new(CrossEntropyLoss::new().ignore_index(-1)), &ce_logits, &ce_ignored),
    ];
    for (name, loss, output, target) in cases {
        let mean = loss.mean(output, target);
        assert!(mean.equal(&get(&format!("mean.{name}"))), "{name}: the mean");
        let per_sample = loss.per_sample(output, target);
        assert!(per_sample.equal(&get(&format!("per_sample.{name}"))), "{name}: per sample");
        // What a weighted mean divides by; the other losses weigh every sample 1.
        match (loss.sample_weights(target), name.starts_with("ce_")) {
            (Some(w), true) => assert!(w.equal(&get(&format!("weights.{name}"))), "{name}"),
            (None, false) => {}
            (w, _) => panic!("{name}: sample weights {w:?}"),
        }
    }
    // A closure is a loss too (its task is the data's).
    let squared = |o: &Tensor, t: &Tensor| (o - t).square().mean_dim(1, false, Kind::Float);
    assert!(squared.per_sample(&reg_out, &reg_target).equal(&get("per_sample.mse")));
    assert_eq!((squared.task(), MSELoss.task()), (None, Some(Task::Regression)));
}

/// A data set of `inputs` (`[N, K]`, shown to the model as `[K, 1, 1]` pictures) with labels or
/// float targets, and a model that hands each picture's values back as its output: an
/// evaluation then scores exactly the oracle's outputs.
pub(crate) fn scored(inputs: &Tensor, targets: &Tensor) -> TensorDataset {
    let n = inputs.size()[0];
    let pictures = inputs.view([n, -1, 1, 1]);
    if targets.kind() == Kind::Int64 {
        TensorDataset::new(&pictures, targets, (0..6).map(|c| c.to_string()).collect()).unwrap()
    } else {
        TensorDataset::with_targets(&pictures, targets).unwrap()
    }
}

#[derive(Debug)]
pub(crate) struct Identity;

impl ModuleT for Identity {
    fn forward_t(&self, xs: &Tensor, _train: bool) -> Tensor {
        xs.flatten(1, -1)
    }
}

/// The sums of evaluating `ds` with `loss` over 2 thread ranks (each rank's copy of the
/// result: the sums over both).
fn evaluated_on_two_ranks(
    ds: TensorDataset,
    loss: impl Loss,
    top_k: Option<usize>,
) -> (Task, RunningMetrics) {
    let out = on_two_ranks(ds, |loader, ddp| {
        let opts = EpochOptions::on(Device::Cpu).quiet().strategy(ddp).top_k_opt(top_k);
        let v = evaluate(&Identity, loader, &loss, &opts)?;
        Ok((v.task, v.samples, v.metrics))
    });
    assert_eq!(out[0].2, out[1].2, "every rank holds the sums over both");
    assert_eq!(out[0].1, 37, "the padding repeat is not counted");
    (out[0].0, out[0].2.clone())
}

/// `f`'s result on each of 2 thread ranks, each with its distributed loader of `ds` (batches of 8)
/// and a DDP wrapper over a model without weights (the wrapper needs one variable; it never
/// trains here).
pub(crate) fn on_two_ranks<T: serde::Serialize + serde::de::DeserializeOwned + Send>(
    ds: TensorDataset,
    f: impl Fn(&mut DataLoader<TensorDataset>, &Ddp) -> trainbook::Result<T> + Sync,
) -> Vec<T> {
    let ds = Arc::new(ds);
    spawn(2, |dist: &Dist| {
        let mut loader = DataLoader::from_arc(ds.clone(), 8).distributed(dist).num_workers(0);
        let vs = VarStore::new(Device::Cpu);
        let _ = vs.root().zeros("unused", &[1]);
        let ddp = Ddp::wrap(&vs, dist)?;
        f(&mut loader, &ddp)
    })
    .unwrap()
}

/// |a - b| within the rounding of a float32 division or square root of the exact value (half
/// an ulp of the result, 2^-24 relative, twice for a square root of a rounded quotient).
fn within_f32(a: f64, b: f64, what: &str) {
    assert!((a - b).abs() <= 2.0 * b.abs() * f64::powi(2.0, -24), "{what}: {a} vs {b}");
}

#[test]
fn the_metrics_of_every_task_equal_torchmetrics_over_two_ranks() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("task-metrics");
    let inputs = common::oracle_tensors("losses.py", "metrics", &work);
    let text = std::fs::read_to_string(work.join("metrics.json")).unwrap();
    let expected: serde_json::Value = serde_json::from_str(&text).unwrap();
    let get = |name: &str| common::get(&inputs, name).shallow_clone();
    let (ml_logits, ml_target) = (get("ml_logits"), get("ml_target"));

    let ds = scored(&ml_logits, &ml_target);
    let (task, m) = evaluated_on_two_ranks(ds, BCEWithLogitsLoss::new(), None);
    assert_eq!(task, Task::MultiLabel);
    let counts: Vec<[u64; 3]> = serde_json::from_value(expected["label_counts"].clone()).unwrap();
    assert_eq!(m.label_counts, counts, "tp, fp, fn of every label");
    let f1: Vec<f64> = serde_json::from_value(expected["f1_per_label"].clone()).unwrap();
    for (label, (ours, theirs)) in m.f1_per_label().iter().zip(&f1).enumerate() {
        within_f32(*ours, *theirs, &format!("F1 of label {label}"));
    }
    within_f32(m.f1_macro(), expected["f1_macro"].as_f64().unwrap(), "macro F1");
    within_f32(m.accuracy(), expected["exact_match"].as_f64().unwrap(), "exact match");

    let (reg_out, reg_target) = (get("reg_out"), get("reg_target"));
    let (task, m) = evaluated_on_two_ranks(scored(&reg_out, &reg_target), MSELoss, None);
    assert_eq!((task, m.values), (Task::Regression, 37 * 2));
    // torchmetrics sums the 74 errors in float32: each addition rounds by at most 2^-24 of the
    // running sum, so 74 additions stay within 74 * 2^-24 of the total (relative).
    let sums_within = |a: f64, b: f64, what: &str| {
        assert!((a - b).abs() <= 74.0 * f64::powi(2.0, -24) * b.abs(), "{what}: {a} vs {b}");
    };
    sums_within(m.mae(), expected["mae"].as_f64().unwrap(), "MAE");
    sums_within(m.rmse(), expected["rmse"].as_f64().unwrap(), "RMSE");

    let (ce_logits, ce_labels) = (get("ce_logits"), get("ce_labels"));
    let ds = scored(&ce_logits, &ce_labels);
    let (task, m) = evaluated_on_two_ranks(ds, CrossEntropyLoss::new(), Some(3));
    assert_eq!(task, Task::Classification);
    within_f32(m.top_k_accuracy(), expected["top3"].as_f64().unwrap(), "top-3 accuracy");
}

#[test]
fn outputs_that_do_not_fit_the_targets_are_an_error_naming_both() {
    let _turn = common::module_turn(module_path!());
    let x = Tensor::randn([8, 3, 1, 1], (Kind::Float, Device::Cpu));
    let targets = Tensor::randn([8, 2], (Kind::Float, Device::Cpu));
    let mut loader = DataLoader::new(TensorDataset::with_targets(&x, &targets).unwrap(), 4);
    let vs = VarStore::new(Device::Cpu);
    let head = tch::nn::linear(vs.root() / "fc", 3, 1, Default::default());
    let net = tch::nn::seq_t().add_fn(|x| x.flatten(1, -1)).add(head);
    let mut opt = Optimizer::sgd(&vs, 0.1, 0.0);
    let opts = EpochOptions::on(Device::Cpu).quiet();
    let err = train_epoch(&net, &mut loader, &mut opt, &MSELoss, &opts).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("[4, 1]") && text.contains("[4, 2]"), "{text}");
    // Class labels with a regression loss: the labels are int64 indices, not float targets.
    let labels = Tensor::zeros([8], (Kind::Int64, Device::Cpu));
    let mut loader = DataLoader::new(TensorDataset::new(&x, &labels, vec![]).unwrap(), 4);
    let err = evaluate(&net, &mut loader, &MSELoss, &opts).unwrap_err();
    assert!(err.to_string().contains("Regression"), "{err}");
    // A top-k larger than the classes.
    let mut loader = DataLoader::new(TensorDataset::new(&x, &labels, vec![]).unwrap(), 4);
    let opts = EpochOptions::on(Device::Cpu).quiet().top_k(5);
    let err = evaluate(&Identity, &mut loader, &CrossEntropyLoss::new(), &opts).unwrap_err();
    assert!(err.to_string().contains("k = 5"), "{err}");
}

/// A model that hands each picture's values back, plus a bias of zeros to train (adding 0.0
/// changes no value), so that a training epoch scores exactly the given logits.
#[derive(Debug)]
struct Shift {
    bias: Tensor,
}

impl ModuleT for Shift {
    fn forward_t(&self, xs: &Tensor, _train: bool) -> Tensor {
        xs.flatten(1, -1) + &self.bias
    }
}

#[test]
fn a_weighted_cross_entropy_epoch_is_the_weighted_mean_over_its_samples() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("weighted-ce");
    let inputs = common::oracle_tensors("losses.py", "metrics", &work);
    let get = |name: &str| common::get(&inputs, name).shallow_clone();
    // 37 samples of 6 classes; three of them ignored.
    let logits = get("ce_logits");
    let labels = get("ce_labels").index_fill(0, &Tensor::from_slice(&[3i64, 17, 30]), -1);
    let loss = CrossEntropyLoss::new().weight(&[0.5, 2.0, 1.0, 3.0, 1.5, 0.25]).ignore_index(-1);
    let weights = loss.sample_weights(&labels).unwrap();
    let total_weight = weights.sum(Kind::Double).double_value(&[]);

    // Evaluation over 2 ranks: the per-sample losses (the kernel checked against torch above)
    // summed in float64, over the sum of the weights. The weights are multiples of 1/4, so
    // their sum is exact in any order; the 37 positive losses summed in another order than
    // the whole set's differ by at most 37 roundings of 2^-53 of the total.
    let per_sample = loss.per_sample(&logits, &labels).to_kind(Kind::Double);
    let whole_set = per_sample.sum(Kind::Double).double_value(&[]) / total_weight;
    let (_, m) = evaluated_on_two_ranks(scored(&logits, &labels), loss.clone(), None);
    assert_eq!((m.loss_weight, m.count), (Some(total_weight), 37));
    let bound = 37.0 * f64::powi(2.0, -53) * whole_set;
    assert!((m.loss() - whole_set).abs() <= bound, "{} vs {whole_set}", m.loss());
    // torch's own mean over the whole set (one float32 kernel call) agrees within float32's
    // rounding of 37 additions and a division.
    let torch_mean = loss.mean(&logits, &labels).double_value(&[]);
    assert!((m.loss() - torch_mean).abs() <= 38.0 * f64::powi(2.0, -24) * torch_mean);

    // Training: every batch's mean (torch's kernel) times the sum of its weights, summed in
    // float64 and divided by all the weights, in the loop's order: equal.
    let vs = VarStore::new(Device::Cpu);
    let net = Shift { bias: vs.root().zeros("bias", &[6]) };
    let mut opt = Optimizer::sgd(&vs, 0.0, 0.0);
    let mut loader = DataLoader::new(scored(&logits, &labels), 8).num_workers(0);
    let opts = EpochOptions::on(Device::Cpu).quiet();
    let trained = train_epoch(&net, &mut loader, &mut opt, &loss, &opts).unwrap();
    let (mut sum, mut weight) = (0.0f64, 0.0f64);
    for start in (0..37).step_by(8) {
        let len = 8.min(37 - start);
        let (x, y) = (logits.narrow(0, start, len), labels.narrow(0, start, len));
        let w = loss.sample_weights(&y).unwrap().sum(Kind::Double).double_value(&[]);
        sum += loss.mean(&x, &y).double_value(&[]) * w;
        weight += w;
    }
    assert_eq!(trained.metrics.loss_weight, Some(weight));
    assert_eq!(trained.loss, sum / weight);
    // Each batch's float32 mean sums at most 8 losses and divides once: within 8 roundings of
    // 2^-24 of its value (its weights' sum is exact), so the epoch is too, plus float64's.
    let bound = 9.0 * f64::powi(2.0, -24) * whole_set;
    assert!((trained.loss - whole_set).abs() <= bound, "{} vs {whole_set}", trained.loss);
}
