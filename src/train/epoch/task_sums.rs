//! What a batch adds to its task's metric sums, computed by device kernels (no read): the
//! correct count (arg-max equals the label; or, multi-label, every label right), and the sums
//! beyond it: the top-k count, the absolute and squared errors, the per-label true/false
//! positive and false negative counts.
use tch::{Kind, Tensor};

use crate::train::loss::Task;
use crate::train::metrics::RunningMetrics;

/// Which sums an epoch keeps: its task, and for classification the `k` of a top-k accuracy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TaskSums {
    pub task: Task,
    pub top_k: Option<usize>,
}

impl Default for TaskSums {
    fn default() -> Self {
        TaskSums { task: Task::Classification, top_k: None }
    }
}

/// A batch's contribution: the correct count (int64 device scalar; `None` for regression),
/// the extra sums (float64 device vector laid out as [`TaskSums::extra_of`] lays out a
/// `RunningMetrics`; `None` when the task keeps none) and the regression values counted.
pub(crate) struct BatchSums {
    pub correct: Option<Tensor>,
    pub extra: Option<Tensor>,
    pub values: u64,
}

impl TaskSums {
    /// The sums of a batch of `output`s against `target`s (class indices `[N]` with logits
    /// `[N, C]`; float `[N, T]` otherwise), without gradients.
    pub fn of_batch(&self, output: &Tensor, target: &Tensor) -> BatchSums {
        tch::no_grad(|| match self.task {
            Task::Classification => {
                // Class probabilities (MixUp/CutMix's): the most probable class is the label,
                // as torchvision's reference reads `target.max(dim=1)[1]`.
                let labels;
                let target = if target.dim() == 2 {
                    labels = target.max_dim(1, false).1;
                    &labels
                } else {
                    target
                };
                let correct = output.argmax(1, false).eq_tensor(target).sum(Kind::Int64);
                let extra = self.top_k.map(|k| {
                    let (_, top) = output.topk(k as i64, 1, true, true);
                    let hit = top.eq_tensor(&target.unsqueeze(1)).any_dim(1, false);
                    hit.sum(Kind::Double).view([1])
                });
                BatchSums { correct: Some(correct), extra, values: 0 }
            }
            Task::Regression => {
                let diff = output.detach().to_kind(Kind::Double) - target.to_kind(Kind::Double);
                let errors = Tensor::stack(
                    &[diff.abs().sum(Kind::Double), diff.square().sum(Kind::Double)],
                    0,
                );
                BatchSums { correct: None, extra: Some(errors), values: target.numel() as u64 }
            }
            Task::MultiLabel => {
                let predicted = output.gt(0.0);
                let truth = target.gt(0.5);
                let count = |t: Tensor| t.sum_dim_intlist(0, false, Kind::Double);
                let tp = count(predicted.logical_and(&truth));
                let fp = count(predicted.logical_and(&truth.logical_not()));
                let fn_ = count(predicted.logical_not().logical_and(&truth));
                let all_right = predicted.eq_tensor(&truth).all_dim(1, false).sum(Kind::Int64);
                let per_label = Tensor::stack(&[tp, fp, fn_], 1).view([-1]);
                BatchSums { correct: Some(all_right), extra: Some(per_label), values: 0 }
            }
        })
    }

    /// The extra sums of `m` in the layout [`of_batch`](Self::of_batch) adds to (`None` when
    /// the task keeps none, or a multi-label run has not seen a batch yet).
    pub fn extra_of(&self, m: &RunningMetrics) -> Option<Vec<f64>> {
        match self.task {
            Task::Classification => self.top_k.map(|_| vec![m.top_k_correct as f64]),
            Task::Regression => Some(vec![m.abs_error_sum, m.squared_error_sum]),
            Task::MultiLabel if m.label_counts.is_empty() => None,
            Task::MultiLabel => Some(m.label_counts.iter().flatten().map(|&c| c as f64).collect()),
        }
    }

    /// Puts extra sums read from the device (as [`extra_of`](Self::extra_of) lays them out)
    /// into `m`.
    pub fn fill(&self, m: &mut RunningMetrics, extra: &[f64]) {
        let count = |v: f64| v.round() as u64;
        match self.task {
            Task::Classification => m.top_k_correct = extra.first().map_or(0, |&v| count(v)),
            Task::Regression => {
                m.abs_error_sum = extra.first().copied().unwrap_or(0.0);
                m.squared_error_sum = extra.get(1).copied().unwrap_or(0.0);
            }
            Task::MultiLabel => {
                m.label_counts = extra
                    .chunks_exact(3)
                    .map(|c| [count(c[0]), count(c[1]), count(c[2])])
                    .collect();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(t: &Tensor) -> Vec<f64> {
        Vec::try_from(t.to_kind(Kind::Double).view([-1])).unwrap()
    }

    #[test]
    fn each_task_counts_by_its_definition() {
        let logits = Tensor::from_slice(&[3.0f32, 2.0, 1.0, 0.0, 1.0, 2.0, 3.0, 0.0]).view([2, 4]);
        let labels = Tensor::from_slice(&[1i64, 0]);
        let top2 =
            TaskSums { task: Task::Classification, top_k: Some(2) }.of_batch(&logits, &labels);
        assert_eq!(top2.correct.unwrap().int64_value(&[]), 0, "neither arg-max is its label");
        assert_eq!(host(&top2.extra.unwrap()), [1.0], "only the first row's label is in its top 2");

        let out = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 5.0]).view([2, 2]);
        let target = Tensor::from_slice(&[1.0f32, 1.0, 1.0, 1.0]).view([2, 2]);
        let r = TaskSums { task: Task::Regression, top_k: None }.of_batch(&out, &target);
        assert_eq!((host(&r.extra.unwrap()), r.values), (vec![7.0, 21.0], 4));

        let logits = Tensor::from_slice(&[1.0f32, -1.0, 2.0, 1.0, -3.0, -2.0]).view([3, 2]);
        let hot = Tensor::from_slice(&[1.0f32, 0.0, 1.0, 0.0, 1.0, 0.0]).view([3, 2]);
        let m = TaskSums { task: Task::MultiLabel, top_k: None }.of_batch(&logits, &hot);
        assert_eq!(m.correct.unwrap().int64_value(&[]), 1, "only the first row is all right");
        // Label 0: predicted for rows 0 and 1, present in all three: tp 2, fp 0, fn 1.
        // Label 1: predicted for row 1 only, present nowhere: tp 0, fp 1, fn 0.
        assert_eq!(host(&m.extra.unwrap()), [2.0, 0.0, 1.0, 0.0, 1.0, 0.0]);
    }

    #[test]
    fn extra_sums_round_trip_through_running_metrics() {
        let m = RunningMetrics { label_counts: vec![[1, 2, 3], [4, 5, 6]], ..Default::default() };
        let s = TaskSums { task: Task::MultiLabel, top_k: None };
        let mut back = RunningMetrics::default();
        s.fill(&mut back, &s.extra_of(&m).unwrap());
        assert_eq!(back.label_counts, m.label_counts);
        assert!(s.extra_of(&RunningMetrics::default()).is_none());
    }
}
