//! Cross-entropy as `torch.nn.CrossEntropyLoss(weight=..., ignore_index=...,
//! label_smoothing=...)`, with the samples' weights for exact weighted epoch means.
use std::sync::{Arc, Mutex, PoisonError};

use tch::{Device, Kind, Reduction, Tensor};

use super::{Loss, Task};

/// torch's default `ignore_index`.
const TORCH_IGNORE_INDEX: i64 = -100;

/// `torch.nn.CrossEntropyLoss` on logits `[N, C]` and int64 class indices `[N]` (or float class
/// probabilities `[N, C]`): log-softmax and negative log-likelihood in one kernel, torch's, with
/// its `weight` (one per class), `ignore_index` and `label_smoothing`.
///
/// With a class `weight` or an explicit `ignore_index`, torch's batch mean is the sum of the
/// per-sample losses (each multiplied by its class's weight; 0 for an ignored label) divided by
/// the sum of those weights, not by the batch size; [`sample_weights`](Loss::sample_weights)
/// gives them, so that an epoch's loss is the same weighted mean over the epoch's samples.
/// Without either, labels equal to -100 are dropped from the batch mean as torch drops them,
/// but an epoch's loss divides by every sample. Accuracy counts every sample: an ignored label
/// is never predicted right (torchmetrics' accuracy with `ignore_index` leaves such samples
/// out; the confusion matrix leaves out labels outside `0..classes`, so a negative ignored
/// label too).
///
/// ```
/// use tch::{Kind, Tensor};
/// use trainbook::train::{CrossEntropyLoss, Loss};
/// let logits = Tensor::from_slice(&[2.0f32, 0.0, 0.0, 2.0, 1.0, 1.0]).view([3, 2]);
/// let labels = Tensor::from_slice(&[0i64, 1, -1]);
/// let loss = CrossEntropyLoss::new().weight(&[1.0, 3.0]).ignore_index(-1);
/// let weights = loss.sample_weights(&labels).unwrap();
/// assert_eq!(Vec::<f64>::try_from(&weights)?, [1.0, 3.0, 0.0]);
/// // torch's mean: the weighted per-sample losses over the sum of the weights.
/// let by_hand = loss.per_sample(&logits, &labels).sum(Kind::Float) / 4.0;
/// assert!((loss.mean(&logits, &labels) - by_hand).abs().double_value(&[]) < 1e-6);
/// # Ok::<(), tch::TchError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CrossEntropyLoss {
    /// Share of the target probability spread uniformly over all classes, in [0, 1]
    /// (torch's `label_smoothing`; default 0.0).
    pub label_smoothing: f64,
    weight: Option<ClassWeights>,
    ignore_index: Option<i64>,
}

impl CrossEntropyLoss {
    /// torch's defaults: no label smoothing, no class weights, `ignore_index` -100.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets [`label_smoothing`](Self::label_smoothing) (e.g. 0.1).
    pub fn label_smoothing(mut self, s: f64) -> Self {
        self.label_smoothing = s;
        self
    }
    /// torch's `weight`: one weight per class, in class order, float32 as torch's tensor holds
    /// them (the model's output must have as many classes; torch's kernel says so otherwise).
    pub fn weight(mut self, per_class: &[f32]) -> Self {
        self.weight = Some(ClassWeights::new(per_class));
        self
    }
    /// torch's `ignore_index`: samples with this label add nothing to the loss, its gradient
    /// or the weights it is divided by (class indices only, as in torch).
    pub fn ignore_index(mut self, label: i64) -> Self {
        self.ignore_index = Some(label);
        self
    }
    /// The class weights, if set.
    pub fn class_weights(&self) -> Option<&[f32]> {
        self.weight.as_ref().map(|w| w.values.as_slice())
    }
    /// The ignored label (torch's default -100 unless [`ignore_index`](Self::ignore_index)
    /// set another).
    pub fn ignored_label(&self) -> i64 {
        self.ignore_index.unwrap_or(TORCH_IGNORE_INDEX)
    }
    fn kernel(&self, logits: &Tensor, labels: &Tensor, reduction: Reduction) -> Tensor {
        let weight = self.weight.as_ref().map(|w| w.on(logits.device(), logits.kind()));
        logits.cross_entropy_loss(
            labels,
            weight.as_ref(),
            reduction,
            self.ignored_label(),
            self.label_smoothing,
        )
    }
    /// The batch's loss as torch's `reduction="mean"` computes it (what backward uses).
    pub fn mean(&self, logits: &Tensor, labels: &Tensor) -> Tensor {
        self.kernel(logits, labels, Reduction::Mean)
    }
    /// Per-sample losses, `reduction="none"` (each times its class's weight; 0 for an ignored
    /// label).
    pub fn per_sample(&self, logits: &Tensor, labels: &Tensor) -> Tensor {
        self.kernel(logits, labels, Reduction::None)
    }
}

impl Loss for CrossEntropyLoss {
    fn per_sample(&self, output: &Tensor, target: &Tensor) -> Tensor {
        CrossEntropyLoss::per_sample(self, output, target)
    }
    fn mean(&self, output: &Tensor, target: &Tensor) -> Tensor {
        CrossEntropyLoss::mean(self, output, target)
    }
    fn task(&self) -> Option<Task> {
        Some(Task::Classification)
    }
    /// `weight[label]` (1 without class weights), 0 for the ignored label; `None` for class
    /// probabilities (torch's mean over them divides by the batch size) or when neither
    /// `weight` nor `ignore_index` was set.
    fn sample_weights(&self, target: &Tensor) -> Option<Tensor> {
        if target.is_floating_point() || (self.weight.is_none() && self.ignore_index.is_none()) {
            return None;
        }
        let kept = target.ne(self.ignored_label());
        let weights = match &self.weight {
            Some(w) => {
                let safe = target.where_scalarother(&kept, 0);
                w.on(target.device(), Kind::Double).index_select(0, &safe)
            }
            None => Tensor::ones(target.size(), (Kind::Double, target.device())),
        };
        Some(weights * kept.to_kind(Kind::Double))
    }
}

/// Class weights with their tensors cached per device and kind: made on the first batch (an
/// eager step), so that a CUDA graph's capture copies nothing from the host.
#[derive(Clone)]
struct ClassWeights {
    values: Vec<f32>,
    tensors: Arc<Mutex<Vec<(Device, Kind, Tensor)>>>,
}

impl ClassWeights {
    fn new(values: &[f32]) -> ClassWeights {
        ClassWeights { values: values.to_vec(), tensors: Arc::default() }
    }
    fn on(&self, device: Device, kind: Kind) -> Tensor {
        let mut cache = self.tensors.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, _, t)) = cache.iter().find(|(d, k, _)| *d == device && *k == kind) {
            return t.shallow_clone();
        }
        let t = Tensor::from_slice(&self.values).to_kind(kind).to_device(device);
        cache.push((device, kind, t.shallow_clone()));
        t
    }
}

impl PartialEq for ClassWeights {
    fn eq(&self, other: &Self) -> bool {
        self.values == other.values
    }
}

impl std::fmt::Debug for ClassWeights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.values)
    }
}
