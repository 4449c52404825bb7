//! How an epoch runs ([`EpochOptions`]: device, progress, the strategy around each step,
//! mixed precision, loss scaling, gradient clipping, accumulation, channels_last) and what it
//! reports after each optimizer step ([`StepInfo`], to a
//! [`StepListener`](crate::train::StepListener): step-wise checkpoints and schedules).
use std::cell::RefCell;

use tch::{Device, Tensor};

use super::device_metrics::DeviceMetrics;
use super::step_record::StepLogging;
use crate::optim::Optimizer;
use crate::progress::{ConsoleProgress, EpochProgress, NoProgress, ProgressReporter};
use crate::train::amp::{GradScaler, Precision};
use crate::train::clip::GradClip;
use crate::train::cuda_graph::StepGraph;
use crate::train::metrics::{RunningMetrics, SharedMetric};
use crate::train::profile::Profiler;
use crate::train::strategy::{SingleProcess, Strategy};

/// What [`train_epoch_with`](crate::train::train_epoch_with) reports after each optimizer step to its
/// [`StepListener::on_step`](crate::train::StepListener::on_step) (for step-wise checkpoints).
pub struct StepInfo<'a> {
    /// Batches of this epoch done so far (skipped ones included).
    pub batches_done: usize,
    /// The optimizer, just after its step.
    pub optimizer: &'a Optimizer,
    pub(crate) running: &'a DeviceMetrics,
}

impl StepInfo<'_> {
    /// This rank's sums for the epoch so far. This reads them from the device (it waits for
    /// the queued work), so call it only when needed, e.g. when a checkpoint is written.
    pub fn metrics(&self) -> RunningMetrics {
        self.running.read()
    }
}

/// Where to run and how to report.
pub struct EpochOptions<'a> {
    /// Where the model lives; batches are moved there.
    pub(crate) device: Device,
    /// Show progress (on the main rank only).
    pub(crate) progress: bool,
    /// Where progress goes when shown (default [`ConsoleProgress`]: a bar or lines).
    pub(crate) reporter: &'a dyn ProgressReporter,
    /// What runs around each step: [`SingleProcess`] or a `Ddp`.
    pub(crate) strategy: &'a dyn Strategy,
    /// Sums carried over from the part of the epoch done before a resume.
    pub(crate) start_metrics: RunningMetrics,
    /// Gradient accumulation: micro-batches per optimizer step (1: a step per batch).
    pub(crate) accumulate: usize,
    /// Autocast for the forward pass and the loss (training and evaluation).
    pub(crate) precision: Precision,
    /// Loss scaling for float16 training (`None`: plain backward and step).
    pub(crate) grad_scaler: Option<&'a RefCell<GradScaler>>,
    /// Hand the batches to the model in the channels_last layout.
    pub(crate) channels_last: bool,
    /// Clip the gradients before each optimizer step.
    pub(crate) clip_grad: Option<GradClip>,
    /// Per-step records ([`StepRecord`](crate::train::StepRecord)s) for the listener.
    pub(crate) step_logging: Option<StepLogging>,
    /// Classification: also count the top-`k` accuracy.
    pub(crate) top_k: Option<usize>,
    /// Metrics of one's own, measured by [`evaluate`](crate::train::evaluate).
    pub(crate) metrics: &'a [SharedMetric],
    /// Metrics of one's own, measured by the training epochs.
    pub(crate) train_metrics: &'a [SharedMetric],
    /// The training step as a CUDA graph (`None`: eager).
    pub(crate) cuda_graph: Option<&'a RefCell<StepGraph>>,
    /// The profiler told of every optimizer step (`None`: none).
    pub(crate) profiler: Option<&'a RefCell<Profiler>>,
}

impl Default for EpochOptions<'_> {
    fn default() -> Self {
        EpochOptions {
            device: Device::Cpu,
            progress: true,
            reporter: &ConsoleProgress,
            strategy: &SingleProcess,
            start_metrics: RunningMetrics::default(),
            accumulate: 1,
            precision: Precision::F32,
            grad_scaler: None,
            channels_last: false,
            clip_grad: None,
            step_logging: None,
            top_k: None,
            metrics: &[],
            train_metrics: &[],
            cuda_graph: None,
            profiler: None,
        }
    }
}

impl<'a> EpochOptions<'a> {
    /// Options for `device`: progress shown, a single process, no accumulation, float32.
    ///
    /// ```
    /// use trainbook::train::{EpochOptions, Precision, SingleProcess};
    /// let opts = EpochOptions::on(tch::Device::Cpu)
    ///     .quiet()
    ///     .strategy(&SingleProcess)
    ///     .precision(Precision::Bf16)
    ///     .accumulate(2);
    /// assert_eq!(opts.device(), tch::Device::Cpu);
    /// ```
    pub fn on(device: Device) -> Self {
        EpochOptions { device, ..Default::default() }
    }
    /// The same as [`on`](Self::on), its one name from now on; `new` stays for one release.
    #[deprecated(note = "use EpochOptions::on(device), the same options")]
    pub fn new(device: Device) -> Self {
        EpochOptions::on(device)
    }
    /// Where the model lives (batches are moved there).
    pub fn device(&self) -> Device {
        self.device
    }
    /// Shows progress (`true`, the default; on the main rank only) or not.
    pub fn progress(mut self, on: bool) -> Self {
        self.progress = on;
        self
    }
    /// No progress output.
    pub fn quiet(mut self) -> Self {
        self.progress = false;
        self
    }
    /// Sends progress to `reporter` instead of the console.
    pub fn reporter(mut self, reporter: &'a dyn ProgressReporter) -> Self {
        self.reporter = reporter;
        self
    }
    /// The progress of an epoch: `reporter` on the main rank when progress is on, else nothing.
    pub(crate) fn begin_progress(
        &self,
        label: &str,
        total_batches: usize,
    ) -> Box<dyn EpochProgress> {
        if self.progress && self.strategy.is_main() {
            self.reporter.begin(label, total_batches)
        } else {
            Box::new(NoProgress)
        }
    }
    /// Runs the steps under `strategy` (a `Ddp` for data-parallel training; Lightning's
    /// `strategy`). Default [`SingleProcess`].
    pub fn strategy(mut self, strategy: &'a dyn Strategy) -> Self {
        self.strategy = strategy;
        self
    }
    /// The same as [`strategy`](Self::strategy), under the name the course's notebooks use.
    pub fn hooks(self, strategy: &'a dyn Strategy) -> Self {
        self.strategy(strategy)
    }
    /// Starts the epoch's sums from `m` (the part done before a resume).
    pub fn start_metrics(mut self, m: RunningMetrics) -> Self {
        self.start_metrics = m;
        self
    }
    /// Runs the forward pass and the loss under autocast (`torch.autocast`) in `precision`.
    pub fn precision(mut self, precision: Precision) -> Self {
        self.precision = precision;
        self
    }
    /// Scales the loss before backward and unscales before the step (`torch.amp.GradScaler`);
    /// use it with [`Precision::F16`].
    pub fn grad_scaler(mut self, scaler: &'a RefCell<GradScaler>) -> Self {
        self.grad_scaler = Some(scaler);
        self
    }
    /// Runs the training step through `graph`, a CUDA graph captured after a few eager steps
    /// and replayed for every batch of the same shape ([`StepGraph`]); give every epoch the
    /// same one. Where the step cannot be captured it runs eagerly and the graph says why.
    pub fn cuda_graph(mut self, graph: &'a RefCell<StepGraph>) -> Self {
        self.cuda_graph = Some(graph);
        self
    }

    /// Why these settings rule a CUDA graph of the step out, if they do (the device last, so
    /// that the other reasons show on a CPU too).
    pub(crate) fn cuda_graph_blocker(&self) -> Option<String> {
        if self.accumulate > 1 {
            return Some(format!(
                "gradient accumulation ({} micro-batches per step) is not captured",
                self.accumulate
            ));
        }
        if self.grad_scaler.is_some() {
            return Some("float16 loss scaling (GradScaler) is not captured".into());
        }
        self.strategy.cuda_graph_blocker().or_else(|| StepGraph::device_blocker(self.device))
    }
    /// Tells `profiler` of every optimizer step (torch's `prof.step()`), starting it first if
    /// it is not started; give every epoch the same one, and stop it when done
    /// ([`Profiler::stop`]). The steps show the loop's phases as ranges
    /// ([`phase`](crate::train::phase)).
    pub fn profiler(mut self, profiler: &'a RefCell<Profiler>) -> Self {
        self.profiler = Some(profiler);
        self
    }
    /// Batches in the channels_last memory format (`x.to(memory_format=torch.channels_last)`).
    pub fn channels_last(mut self, on: bool) -> Self {
        self.channels_last = on;
        self
    }
    /// Clips the gradients before each optimizer step, as `torch.nn.utils.clip_grad_norm_`
    /// (or `clip_grad_value_`) between `backward` and `step` in a PyTorch loop; with a
    /// `grad_scaler`, after `scaler.unscale_(optimizer)`. With norm clipping the epoch's
    /// summary reports the mean norm before clipping (`EpochSummary::grad_norm`).
    pub fn clip_grad(mut self, clip: GradClip) -> Self {
        self.clip_grad = Some(clip);
        self
    }
    /// Sends a [`StepRecord`](crate::train::StepRecord) of every optimizer step, numbered as
    /// `logging` says, to the epoch's listener
    /// ([`StepListener::on_steps_read`](crate::train::StepListener::on_steps_read)): the records are
    /// read from the device together with the running sums (when progress is printed, when
    /// `on_step` reads the metrics, at the epoch's end), so they add no wait for the device;
    /// they arrive in bursts, in step order.
    pub fn step_records(mut self, logging: StepLogging) -> Self {
        self.step_logging = Some(logging);
        self
    }
    /// Also reports the top-`k` accuracy of a classification (`EpochSummary::top_k_accuracy`).
    pub fn top_k(mut self, k: usize) -> Self {
        self.top_k = Some(k);
        self
    }
    /// [`top_k`](Self::top_k) with `Some(k)`; `None` (the default): no top-k accuracy.
    pub fn top_k_opt(mut self, k: Option<usize>) -> Self {
        self.top_k = k;
        self
    }
    /// Measures `metrics` ([`Metric`](crate::train::Metric)s of one's own) in
    /// [`evaluate`](crate::train::evaluate), over all ranks: `EpochSummary::user_metrics`.
    pub fn metrics(mut self, metrics: &'a [SharedMetric]) -> Self {
        self.metrics = metrics;
        self
    }
    /// Measures `metrics` on the training batches in
    /// [`train_epoch`](crate::train::train_epoch), over all ranks:
    /// `EpochSummary::user_metrics` of the training epoch, and each step's values in its
    /// [`StepRecord::metrics`](crate::train::StepRecord::metrics) (this rank's samples).
    pub fn train_metrics(mut self, metrics: &'a [SharedMetric]) -> Self {
        self.train_metrics = metrics;
        self
    }
    /// Accumulates the gradients of `k` micro-batches per optimizer step: the first k-1
    /// exchange nothing between ranks, the k-th exchanges the sum; each micro-batch's loss is
    /// divided by the window's size, so a window of k batches of b equals one batch of k*b
    /// (without BatchNorm). The epoch's last window may be shorter.
    pub fn accumulate(mut self, k: usize) -> Self {
        self.accumulate = k;
        self
    }
}

impl EpochOptions<'_> {
    /// A batch's images on the device, in the layout the options ask for.
    pub(crate) fn batch_images(&self, images: &Tensor) -> Tensor {
        // A batch the loader already delivered to the device (pinned, non-blocking) is used as it
        // is: `to_device` onto its own device returns the tensor itself, as torch's `.to` does.
        let x = images.to_device(self.device);
        if self.channels_last {
            crate::models::channels_last(&x)
        } else {
            x
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Kind;

    #[test]
    fn a_batch_already_on_the_device_is_not_copied_again() {
        let images = Tensor::zeros([2, 1, 4, 4], (Kind::Float, Device::Cpu));
        let x = EpochOptions::on(Device::Cpu).batch_images(&images);
        assert_eq!(x.data_ptr(), images.data_ptr(), "the loader's copy is the one used");
        let labels = Tensor::from_slice(&[1i64, 2]);
        assert_eq!(labels.to_device(Device::Cpu).data_ptr(), labels.data_ptr());
    }
}
