//! One epoch of training or evaluation over a `DataLoader`, returning an exact per-sample
//! summary (loss, accuracy, samples, seconds, img/s).
//!
//! A step queues its work on the device and moves on: the running loss and correct counts stay
//! on the device ([`DeviceMetrics`]) and are read only when progress is printed, when `on_step`
//! asks for them (a checkpoint) and at the epoch's end.
use std::cell::RefCell;
use std::time::Instant;

use tch::nn::ModuleT;
use tch::{Device, Kind, Tensor};

use super::amp::{GradScaler, Precision};
use super::device_metrics::DeviceMetrics;
use super::loss::CrossEntropyLoss;
use super::metrics::{ConfusionMatrix, RunningMetrics};
use super::optim::Optimizer;
use super::strategy::{SingleProcess, Strategy};
use super::timing::{data_wait_note, Timed};
use crate::data::{DataLoader, Dataset};
use crate::progress::{ConsoleProgress, EpochProgress, NoProgress, ProgressReporter};
use crate::Result;

/// What [`train_epoch`] reports after each optimizer step (for step-wise checkpoints).
pub struct StepInfo<'a> {
    /// Batches of this epoch done so far (skipped ones included).
    pub batches_done: usize,
    /// The optimizer, just after its step.
    pub optimizer: &'a Optimizer,
    running: &'a DeviceMetrics,
}

impl StepInfo<'_> {
    /// This rank's sums for the epoch so far. This reads them from the device (it waits for
    /// the queued work), so call it only when needed, e.g. when a checkpoint is written.
    pub fn metrics(&self) -> RunningMetrics {
        self.running.read()
    }
}

/// A callback run after every training step.
pub type OnStep<'a> = &'a dyn Fn(&StepInfo) -> Result<()>;

/// A per-step learning-rate update: called with the rate the optimizer step just used, it
/// returns the rate of the next step (a per-step [`LrSchedule`](super::LrSchedule)'s
/// `advance`).
pub type LrAfterStep<'a> = &'a dyn Fn(f64) -> Result<f64>;

/// Where to run and how to report.
pub struct EpochOptions<'a> {
    /// Where the model lives; batches are moved there.
    pub device: Device,
    /// Show progress (on the main rank only).
    pub progress: bool,
    /// Where progress goes when shown (default [`ConsoleProgress`]: a bar or lines).
    pub reporter: &'a dyn ProgressReporter,
    /// What runs around each step: [`SingleProcess`] or a `Ddp`.
    pub hooks: &'a dyn Strategy,
    /// Called after every optimizer step (checkpoints mid-epoch).
    pub on_step: Option<OnStep<'a>>,
    /// Sets the learning rate after every optimizer step, before `on_step` (so a checkpoint
    /// written there holds the new rate): a per-step schedule.
    pub lr_after_step: Option<LrAfterStep<'a>>,
    /// Sums carried over from the part of the epoch done before a resume.
    pub start_metrics: RunningMetrics,
    /// Gradient accumulation: micro-batches per optimizer step (1: a step per batch).
    pub accumulate: usize,
    /// Autocast for the forward pass and the loss (training and evaluation).
    pub precision: Precision,
    /// Loss scaling for float16 training (`None`: plain backward and step).
    pub grad_scaler: Option<&'a RefCell<GradScaler>>,
    /// Hand the batches to the model in the channels_last layout (pair it with
    /// `models::to_channels_last` on the model).
    pub channels_last: bool,
}

impl Default for EpochOptions<'_> {
    fn default() -> Self {
        EpochOptions {
            device: Device::Cpu,
            progress: true,
            reporter: &ConsoleProgress,
            hooks: &SingleProcess,
            on_step: None,
            lr_after_step: None,
            start_metrics: RunningMetrics::default(),
            accumulate: 1,
            precision: Precision::F32,
            grad_scaler: None,
            channels_last: false,
        }
    }
}

impl<'a> EpochOptions<'a> {
    /// Options for `device`: progress shown, a single process, no accumulation, float32.
    pub fn on(device: Device) -> Self {
        EpochOptions { device, ..Default::default() }
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
    fn begin_progress(&self, label: &str, total_batches: usize) -> Box<dyn EpochProgress> {
        if self.progress && self.hooks.is_main() {
            self.reporter.begin(label, total_batches)
        } else {
            Box::new(NoProgress)
        }
    }
    /// Runs the steps through `hooks` (a `Ddp` for data-parallel training).
    pub fn hooks(mut self, hooks: &'a dyn Strategy) -> Self {
        self.hooks = hooks;
        self
    }
    /// Calls `f` after every optimizer step.
    pub fn on_step(mut self, f: OnStep<'a>) -> Self {
        self.on_step = Some(f);
        self
    }
    /// After every optimizer step, sets the learning rate to `f(rate the step used)`, e.g.
    /// `&|lr| schedule.borrow_mut().advance(lr, None)` for a per-step
    /// [`LrSchedule`](super::LrSchedule) in a `RefCell`. It runs before `on_step`.
    pub fn lr_after_step(mut self, f: LrAfterStep<'a>) -> Self {
        self.lr_after_step = Some(f);
        self
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
    /// Batches in the channels_last memory format (`x.to(memory_format=torch.channels_last)`).
    pub fn channels_last(mut self, on: bool) -> Self {
        self.channels_last = on;
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
    fn batch_images(&self, images: &Tensor) -> Tensor {
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

/// The result of an epoch. `loss` and `accuracy` are exact means over `samples`.
#[derive(Clone, Debug, PartialEq)]
pub struct EpochSummary {
    /// Mean loss per sample.
    pub loss: f64,
    /// Fraction of samples classified correctly (0 to 1).
    pub accuracy: f64,
    /// Samples seen by all ranks (padding repeats excluded).
    pub samples: u64,
    /// Wall-clock seconds of the epoch.
    pub seconds: f64,
    /// Samples per second over all ranks.
    pub img_per_s: f64,
    /// Seconds each rank (in rank order) waited for its data loader during the epoch.
    pub data_wait_s: Vec<f64>,
    /// Filled by [`evaluate`]: rows are true classes, columns predictions (all ranks).
    pub confusion: Option<ConfusionMatrix>,
}

impl std::fmt::Display for EpochSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "loss {:.4}  acc {:.2}%  {} samples  {:.1} s  {:.1} img/s",
            self.loss,
            self.accuracy * 100.0,
            self.samples,
            self.seconds,
            self.img_per_s
        )?;
        let note = data_wait_note(&self.data_wait_s, self.seconds);
        if !note.is_empty() {
            write!(f, "  {note}")?;
        }
        Ok(())
    }
}

fn summary(
    m: RunningMetrics,
    seconds: f64,
    data_wait_s: Vec<f64>,
    confusion: Option<ConfusionMatrix>,
) -> EpochSummary {
    EpochSummary {
        loss: m.loss(),
        accuracy: m.accuracy(),
        samples: m.count,
        seconds,
        img_per_s: m.count as f64 / seconds.max(1e-9),
        data_wait_s,
        confusion,
    }
}

/// Trains `model` for one pass over `loader` (which the caller positions with `set_epoch`).
pub fn train_epoch<D: Dataset + 'static>(
    model: &dyn ModuleT,
    loader: &mut DataLoader<D>,
    optimizer: &mut Optimizer,
    loss_fn: &CrossEntropyLoss,
    opts: &EpochOptions,
) -> Result<EpochSummary> {
    let start = Instant::now();
    let mut progress = opts.begin_progress("train", loader.len());
    let mut running = DeviceMetrics::new(opts.device, opts.start_metrics);
    let k = opts.accumulate;
    if k == 0 {
        return Err(crate::Error::InvalidArgument(
            "EpochOptions::accumulate must be at least 1".into(),
        ));
    }
    let total_batches = loader.len();
    let mut batches = Timed::new(loader.iter());
    for batch in &mut batches {
        let batch = batch?;
        // Windows are aligned to the epoch's batch positions, so a resumed run (which restarts
        // at a window boundary) groups the micro-batches exactly as an uninterrupted one.
        let (window_start, position) = (batch.position / k * k, batch.position);
        let window = k.min(total_batches - window_start);
        let last_in_window = position + 1 == window_start + window;
        let (x, y) = (opts.batch_images(&batch.images), batch.labels.to_device(opts.device));
        opts.hooks.pre_forward(last_in_window)?;
        let (logits, loss) = opts.precision.run(opts.device, || {
            let logits = model.forward_t(&x, true);
            let loss = loss_fn.mean(&logits, &y);
            (logits, loss)
        })?;
        if position == window_start {
            optimizer.zero_grad();
        }
        let mut scaled = if window > 1 { &loss / window as f64 } else { loss.shallow_clone() };
        if let Some(scaler) = opts.grad_scaler {
            scaled = scaler.borrow().scale(&scaled);
        }
        opts.hooks.run_backward(&scaled, last_in_window)?;
        running.add_mean_loss(&loss, &logits, &y);
        progress.advance(batch.len(), &mut || running.read().loss());
        if last_in_window {
            match opts.grad_scaler {
                Some(scaler) => drop(scaler.borrow_mut().step(optimizer)?),
                None => optimizer.step()?,
            }
            if let Some(f) = opts.lr_after_step {
                let lr = f(optimizer.lr())?;
                optimizer.set_lr(lr);
            }
            if let Some(f) = opts.on_step {
                f(&StepInfo { batches_done: position + 1, optimizer, running: &running })?;
            }
        }
    }
    let waited = opts.hooks.gather_f64(batches.waited_s())?;
    let local = running.read();
    let total = opts.hooks.reduce_metrics(local)?;
    let result = summary(total, start.elapsed().as_secs_f64(), waited, None);
    progress.finish(&result.to_string());
    Ok(result)
}

/// Evaluates `model` (eval mode, no gradients) over `loader`: exact loss and accuracy over the
/// real samples (padding repeats of a `DistributedSampler` are excluded) and the confusion matrix.
pub fn evaluate<D: Dataset + 'static>(
    model: &dyn ModuleT,
    loader: &mut DataLoader<D>,
    loss_fn: &CrossEntropyLoss,
    opts: &EpochOptions,
) -> Result<EpochSummary> {
    let start = Instant::now();
    let classes = loader.dataset().classes().len();
    let mut progress = opts.begin_progress("eval", loader.len());
    let mut running = DeviceMetrics::new(opts.device, RunningMetrics::default());
    let (mut preds, mut truths) = (Vec::new(), Vec::new());
    let mut batches = Timed::new(loader.iter());
    for batch in &mut batches {
        let batch = batch?;
        let keep: Vec<i64> =
            (0..batch.len() as i64).filter(|&k| !batch.is_padding[k as usize]).collect();
        let keep = Tensor::from_slice(&keep).to_device(opts.device);
        let (x, y) = (opts.batch_images(&batch.images), batch.labels.to_device(opts.device));
        let (logits, losses) = opts.precision.run(opts.device, || {
            tch::no_grad(|| {
                let logits = model.forward_t(&x, false).index_select(0, &keep);
                let losses = loss_fn.per_sample(&logits, &y.index_select(0, &keep));
                (logits, losses)
            })
        })?;
        let y = y.index_select(0, &keep);
        running.add_loss_sum(&losses.sum(Kind::Double), &logits, &y);
        // Predictions stay on the device until the epoch ends (one copy, not one per batch).
        preds.push(logits.argmax(1, false));
        truths.push(y);
        progress.advance(batch.len(), &mut || running.read().loss());
    }
    let local = running.read();
    let to_cpu = |t: Tensor| t.to_device(Device::Cpu);
    let total = opts.hooks.reduce_metrics(local)?;
    let empty = || Tensor::zeros([0], (Kind::Int64, Device::Cpu));
    let (p, t) = if preds.is_empty() {
        (empty(), empty())
    } else {
        (to_cpu(Tensor::cat(&preds, 0)), to_cpu(Tensor::cat(&truths, 0)))
    };
    let (p, t) = opts.hooks.gather_labels(p, t)?;
    let mut confusion = ConfusionMatrix::new(classes);
    confusion.add(&p, &t);
    let waited = opts.hooks.gather_f64(batches.waited_s())?;
    let result = summary(total, start.elapsed().as_secs_f64(), waited, Some(confusion));
    progress.finish(&result.to_string());
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_already_on_the_device_is_not_copied_again() {
        let images = Tensor::zeros([2, 1, 4, 4], (Kind::Float, Device::Cpu));
        let x = EpochOptions::on(Device::Cpu).batch_images(&images);
        assert_eq!(x.data_ptr(), images.data_ptr(), "the loader's copy is the one used");
        let labels = Tensor::from_slice(&[1i64, 2]);
        assert_eq!(labels.to_device(Device::Cpu).data_ptr(), labels.data_ptr());
    }
}
