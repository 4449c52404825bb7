//! The built-in metrics of one's own shape against torchmetrics (tests/oracle/class_metrics.py):
//! multiclass precision, recall and F1 (micro, macro, weighted, per class) and AUROC over
//! fixed thresholds, measured by `evaluate` over 2 Gloo thread ranks (45 samples: the
//! DistributedSampler pads one, which must not count), equal torchmetrics' float32 values over
//! the whole set **bit for bit**: the sums are exact counts, and the value is computed from them
//! by the same tensor operations on the same libtorch. Also: a metric whose sums have another
//! length than it says, and bad names, are errors naming the metric.
use crate::common;
use crate::losses::{on_two_ranks, scored, Identity};

use std::sync::Arc;

use tch::{Device, Tensor};
use trainbook::data::{DataLoader, TensorDataset};
use trainbook::train::{
    evaluate, Average, CrossEntropyLoss, EpochOptions, Metric, MetricValue, Mode, MulticlassAuroc,
    MulticlassScore, SharedMetric,
};

/// Every metric's value from evaluating `ds` over 2 thread ranks (rank 0's copy; both ranks'
/// are checked to be the same).
fn measured_on_two_ranks(ds: TensorDataset, metrics: &[SharedMetric]) -> Vec<MetricValue> {
    let out = on_two_ranks(ds, |loader, ddp| {
        let opts = EpochOptions::on(Device::Cpu).quiet().strategy(ddp).metrics(metrics);
        let v = evaluate(&Identity, loader, &CrossEntropyLoss::new(), &opts)?;
        assert_eq!(v.samples, 45, "the padding repeat is not counted");
        let values = v.user_metrics.iter();
        Ok(values
            .map(|m| (m.name.clone(), m.value, m.per_class.clone(), m.sums.clone()))
            .collect::<Vec<_>>())
    });
    assert_eq!(out[0], out[1], "every rank holds the values over both");
    out[0]
        .iter()
        .map(|(name, value, per_class, sums)| MetricValue {
            name: name.clone(),
            value: *value,
            per_class: per_class.clone(),
            sums: sums.clone(),
        })
        .collect()
}

/// The float32 value `name` of the oracle, as f64 (exact).
fn expected(oracle: &[(String, Tensor)], name: &str) -> Vec<f64> {
    Vec::<f64>::try_from(common::get(oracle, name).to_kind(tch::Kind::Double).view([-1])).unwrap()
}

fn same_bits(ours: &[f64], theirs: &[f64], what: &str) {
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(ours), bits(theirs), "{what}: {ours:?} vs torchmetrics' {theirs:?}");
}

#[test]
fn precision_recall_f1_and_auroc_equal_torchmetrics_bit_for_bit_over_two_ranks() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("class-metrics");
    let oracle = common::oracle_tensors("class_metrics.py", "values", &work);
    let (logits, labels, probs) = (
        common::get(&oracle, "in.logits"),
        common::get(&oracle, "in.labels"),
        common::get(&oracle, "in.probs"),
    );

    let mut metrics: Vec<SharedMetric> = Vec::new();
    let scores = [
        ("precision", MulticlassScore::precision(6)),
        ("recall", MulticlassScore::recall(6)),
        ("f1", MulticlassScore::f1(6)),
    ];
    for (_, score) in &scores {
        for average in [Average::Micro, Average::Macro, Average::Weighted] {
            metrics.push(Arc::new(score.clone().average(average)));
        }
    }
    metrics.push(Arc::new(MulticlassAuroc::new(6, 5)));
    let measured = measured_on_two_ranks(scored(logits, labels), &metrics);
    for (k, (stat, _)) in scores.iter().enumerate() {
        for (j, average) in ["micro", "macro", "weighted"].iter().enumerate() {
            let m = &measured[3 * k + j];
            assert_eq!(m.name, format!("{stat}_{average}"));
            same_bits(&[m.value], &expected(&oracle, &format!("{stat}_{average}")), &m.name);
            let per_class = m.per_class.as_deref().unwrap();
            same_bits(
                per_class,
                &expected(&oracle, &format!("{stat}_none")),
                &format!("{stat} per class"),
            );
        }
    }
    let auroc = measured.last().unwrap();
    same_bits(&[auroc.value], &expected(&oracle, "auroc5_macro"), "AUROC, 5 thresholds");
    same_bits(
        auroc.per_class.as_deref().unwrap(),
        &expected(&oracle, "auroc5_none"),
        "AUROC per class",
    );

    // More thresholds, and outputs that are probabilities already (no softmax, as torchmetrics).
    let fifty: Vec<SharedMetric> = vec![Arc::new(MulticlassAuroc::new(6, 50))];
    let m = &measured_on_two_ranks(scored(logits, labels), &fifty)[0];
    same_bits(&[m.value], &expected(&oracle, "auroc50_macro"), "AUROC, 50 thresholds");
    same_bits(
        m.per_class.as_deref().unwrap(),
        &expected(&oracle, "auroc50_none"),
        "AUROC 50 per class",
    );
    let twenty: Vec<SharedMetric> = vec![Arc::new(MulticlassAuroc::new(6, 20))];
    let m = &measured_on_two_ranks(scored(probs, labels), &twenty)[0];
    same_bits(&[m.value], &expected(&oracle, "auroc20_probs"), "AUROC of probabilities");
    // The macro average left class 5 out (never a label, never predicted): had it counted as 0,
    // the mean over 6 classes would be 5/6 of the one over 5.
    let f1 = &measured[7];
    let five = f1.per_class.as_ref().unwrap()[..5].iter().sum::<f64>();
    assert!((f1.value - five / 5.0).abs() < 1e-6, "{} vs {}", f1.value, five / 5.0);
}

/// A metric whose batches disagree with its `sums_len`.
struct Liar;
impl Metric for Liar {
    fn name(&self) -> &str {
        "liar"
    }
    fn mode(&self) -> Mode {
        Mode::Max
    }
    fn sums_len(&self) -> usize {
        3
    }
    fn batch_sums(&self, output: &Tensor, _target: &Tensor) -> Tensor {
        Tensor::zeros([2], (tch::Kind::Double, output.device()))
    }
    fn compute(&self, sums: &[f64]) -> f64 {
        sums[0]
    }
}

#[test]
fn a_metric_with_the_wrong_number_of_sums_is_an_error_naming_it() {
    let _turn = common::module_turn(module_path!());
    let x = Tensor::randn([4, 3, 1, 1], (tch::Kind::Float, Device::Cpu));
    let y = Tensor::from_slice(&[0i64, 1, 2, 0]);
    let names = (0..3).map(|c| c.to_string()).collect();
    let mut loader = DataLoader::new(TensorDataset::new(&x, &y, names).unwrap(), 2).num_workers(0);
    let metrics: Vec<SharedMetric> = vec![Arc::new(Liar)];
    let opts = EpochOptions::on(Device::Cpu).quiet().metrics(&metrics);
    let err = evaluate(&Identity, &mut loader, &CrossEntropyLoss::new(), &opts).unwrap_err();
    assert!(
        err.to_string().contains("metric \"liar\": batch_sums gave 2 values, sums_len says 3"),
        "{err}"
    );
}
