//! One epoch of training or evaluation over a `DataLoader` with any [`Loss`], returning an
//! exact per-sample summary (loss, the task's metrics, samples, seconds, img/s); the wing holds
//! its options (`options.rs`), its listener (`step_listener.rs`), the sums kept on the device
//! (`device_metrics.rs`, `task_sums.rs`, and the run's own metrics' in `metric_sums.rs`), the step records (`step_record.rs`), the summary
//! (`summary.rs`) and the loader-wait timing (`timing.rs`).
//!
//! A step queues its work on the device and moves on: the running loss and correct counts stay
//! on the device ([`DeviceMetrics`]) and are read only when progress is printed, when the
//! listener's `on_step` asks for them (a checkpoint) and at the epoch's end.
pub(crate) mod device_metrics;
mod metric_sums;
mod options;
mod step_listener;
mod step_record;
mod summary;
mod task_sums;
mod timing;

pub use device_metrics::DeviceMetrics;
pub use options::{EpochOptions, StepInfo};
pub use step_listener::{BeforeOptimizerStep, StepListener};
pub use step_record::{StepLogging, StepRecord};
pub use timing::{data_wait_note, LOADER_BOUND_FRACTION};

use std::time::Instant;

use tch::nn::ModuleT;
use tch::{Device, Kind, Tensor};

use self::device_metrics::TaskSums;
pub use self::summary::EpochSummary;
use self::timing::{GpuPeaks, Timed};
use super::clip::NormMean;
use super::loss::{check_batch, Loss, Task};
use super::metrics::{ConfusionMatrix, RunningMetrics};
use super::profile::{phase, phase_range};
use super::step::{ModelStep, StepBatch, TrainStep};
use crate::data::{Batch, DataLoader, Dataset};
use crate::optim::Optimizer;
use crate::Result;

/// The task an epoch over `dataset` runs: the step's (its loss's) own, else the one its data
/// implies (float targets: regression; class labels: classification).
pub(crate) fn task_of(own: Option<Task>, dataset: &dyn Dataset) -> Task {
    own.unwrap_or_else(|| Task::of_targets(!dataset.is_empty() && dataset.target(0).is_some()))
}

/// The batch as the step sees it: its images (on the device, in the run's memory format), its
/// target and extra inputs on the device.
fn step_inputs(opts: &EpochOptions, batch: &Batch) -> (Tensor, Tensor, Vec<Tensor>) {
    let extras = batch.extra_inputs.iter().map(|t| t.to_device(opts.device)).collect();
    (opts.batch_images(&batch.images), batch.target().to_device(opts.device), extras)
}

/// The step's training output for `batch`, inside the run's autocast, with the task's shapes
/// and the top-k checked.
fn train_forward(
    step: &dyn TrainStep,
    opts: &EpochOptions,
    batch: &StepBatch<'_>,
) -> Result<(Tensor, Tensor)> {
    let _range = phase_range(phase::FORWARD);
    let out = opts.precision.run(opts.device, || step.train_step(batch))??;
    check_batch(batch.task, opts.top_k, &out.output, batch.target)?;
    Ok((out.output, out.loss))
}

/// Trains `model` for one pass over `loader` (which the caller positions with `set_epoch`),
/// minimising `loss_fn` (a [`CrossEntropyLoss`](crate::train::CrossEntropyLoss) for class labels,
/// [`MSELoss`](crate::train::MSELoss) for float targets, any [`Loss`]). The summary holds the task's
/// metrics ([`Task`]: the loss's, else the data's).
pub fn train_epoch<D: Dataset + 'static>(
    model: &dyn ModuleT,
    loader: &mut DataLoader<D>,
    optimizer: &mut Optimizer,
    loss_fn: &dyn Loss,
    opts: &EpochOptions,
) -> Result<EpochSummary> {
    train_epoch_with(model, loader, optimizer, loss_fn, opts, &mut ())
}

/// [`train_epoch`] telling `listener` of every optimizer step (after it: the next rates, then
/// the step itself) and of the step records as they are read ([`StepListener`]).
pub fn train_epoch_with<D: Dataset + 'static>(
    model: &dyn ModuleT,
    loader: &mut DataLoader<D>,
    optimizer: &mut Optimizer,
    loss_fn: &dyn Loss,
    opts: &EpochOptions,
    listener: &mut dyn StepListener,
) -> Result<EpochSummary> {
    train_epoch_step(&ModelStep { model, loss: loss_fn }, loader, optimizer, opts, listener)
}

/// [`train_epoch_with`] for a step of one's own ([`TrainStep`]): its forward pass and loss on
/// each batch, and everything else as for a model and a loss (the accumulation, the loss
/// scaling, the optimizer step, the exact metrics of the step's output, the listener). A CUDA
/// graph captures the step like the model's, with a static buffer for each extra input.
pub fn train_epoch_step<D: Dataset + 'static>(
    step: &dyn TrainStep,
    loader: &mut DataLoader<D>,
    optimizer: &mut Optimizer,
    opts: &EpochOptions,
    listener: &mut dyn StepListener,
) -> Result<EpochSummary> {
    let start = Instant::now();
    let mut progress = opts.begin_progress("train", loader.len());
    // A resumed epoch (the same batches skipped on every rank) counts only what it trains now in
    // its rate: the restored metrics hold samples an earlier run trained in its own time.
    let resumed = loader.batches_to_skip() > 0;
    progress.resume_at(loader.batches_to_skip());
    let task = task_of(step.task(), loader.dataset());
    let sums = TaskSums { task, top_k: opts.top_k };
    let mut running = DeviceMetrics::for_task(opts.device, &opts.start_metrics, sums);
    if opts.step_logging.is_some() {
        running = running.with_step_records();
    }
    let own = opts.train_metrics;
    let mut running = running.with_own_metrics(own, &opts.start_metrics, opts.device)?;
    let deliver_steps = |running: &DeviceMetrics, listener: &mut dyn StepListener| -> Result<()> {
        let ready = if opts.step_logging.is_some() { running.take_steps() } else { Vec::new() };
        if ready.is_empty() {
            Ok(())
        } else {
            listener.on_steps_read(&ready)
        }
    };
    let k = opts.accumulate;
    if k == 0 {
        return Err(crate::Error::InvalidArgument(
            "EpochOptions::accumulate must be at least 1".into(),
        ));
    }
    let total_batches = loader.len();
    let peaks = GpuPeaks::start(opts.device)?;
    let mut norms = NormMean::default();
    let mut steps = 0;
    if let Some(p) = opts.profiler.filter(|p| !p.borrow().is_started()) {
        p.borrow_mut().start()?;
    }
    let mut batches = Timed::new(loader.iter());
    for batch in &mut batches {
        let batch = batch?;
        // Windows are aligned to the epoch's batch positions, so a resumed run (which restarts
        // at a window boundary) groups the micro-batches exactly as an uninterrupted one.
        let (window_start, position) = (batch.position / k * k, batch.position);
        let window = k.min(total_batches - window_start);
        let last_in_window = position + 1 == window_start + window;
        let (x, y, extra_inputs) = step_inputs(opts, &batch);
        let graphed = match opts.cuda_graph {
            Some(graph) => {
                let mut all = vec![x.shallow_clone(), y.shallow_clone()];
                all.extend(extra_inputs.iter().map(Tensor::shallow_clone));
                let on = (opts.device, opts.strategy, opts.progress);
                let blocker = || opts.cuda_graph_blocker();
                graph.borrow_mut().train_step(on, blocker, &all, optimizer, &mut |t| {
                    // What the eager step below does with one micro-batch per step, no scaler.
                    opts.strategy.pre_forward(true)?;
                    let (images, target, extra_inputs) = (&t[0], &t[1], &t[2..]);
                    let inputs = StepBatch { images, target, extra_inputs, task };
                    let (logits, loss) = train_forward(step, opts, &inputs)?;
                    let _range = phase_range(phase::BACKWARD);
                    opts.strategy.run_backward(&loss, true)?;
                    Ok((logits, loss))
                })?
            }
            None => None,
        };
        let (logits, loss) = match graphed {
            Some(step) => step,
            None => {
                opts.strategy.pre_forward(last_in_window)?;
                let extra_inputs = extra_inputs.as_slice();
                let inputs = StepBatch { images: &x, target: &y, extra_inputs, task };
                let (logits, loss) = train_forward(step, opts, &inputs)?;
                if position == window_start {
                    optimizer.zero_grad();
                }
                let mut scaled =
                    if window > 1 { &loss / window as f64 } else { loss.shallow_clone() };
                if let Some(scaler) = opts.grad_scaler {
                    scaled = scaler.borrow().scale(&scaled);
                }
                let _range = phase_range(phase::BACKWARD);
                opts.strategy.run_backward(&scaled, last_in_window)?;
                (logits, loss)
            }
        };
        let weights = step.loss_weights(&StepBatch {
            images: &x,
            target: &y,
            extra_inputs: &extra_inputs,
            task,
        });
        running.add_mean_loss_weighted(&loss, &logits, &y, weights.as_ref());
        running.add_own(&logits, &y)?;
        progress.advance(batch.len(), &mut || running.read().loss());
        if last_in_window {
            listener.before_optimizer_step(&mut BeforeOptimizerStep::new(
                optimizer,
                opts.grad_scaler,
            ))?;
            let optimizer_range = phase_range(phase::OPTIMIZER_STEP);
            let mut step_norm = None;
            if let Some(clip) = &opts.clip_grad {
                // torch: scaler.unscale_(optimizer) before clipping, so the bound applies to
                // the true gradients (unless the moment before the step did); the scaler's step
                // then skips its own unscale.
                if let Some(scaler) = opts.grad_scaler.filter(|s| !s.borrow().is_unscaled()) {
                    scaler.borrow_mut().unscale_(optimizer)?;
                }
                if let Some(norm) = clip.apply(optimizer)? {
                    norms.add(&norm);
                    step_norm = Some(norm);
                }
            }
            let lr_used = optimizer.lr();
            match opts.grad_scaler {
                Some(scaler) => drop(scaler.borrow_mut().step(optimizer)?),
                None => optimizer.step()?,
            }
            drop(optimizer_range);
            steps += 1;
            if let Some(log) = &opts.step_logging {
                let step = log.steps_before + steps;
                running.end_step(step, log.epoch, position + 1, lr_used, step_norm.as_ref());
            }
            listener.lr_after_step(optimizer)?;
            listener.on_step(&StepInfo {
                batches_done: position + 1,
                optimizer,
                running: &running,
            })?;
            deliver_steps(&running, listener)?;
            if let Some(p) = opts.profiler {
                p.borrow_mut().step()?;
            }
        }
    }
    let waited = opts.strategy.gather_f64(batches.waited_s())?;
    let local = running.read();
    deliver_steps(&running, listener)?;
    let trained_here = local.count.saturating_sub(opts.start_metrics.count) as f64;
    let total = opts.strategy.reduce_metrics(local)?;
    let user_metrics = metric_sums::values_of(own, &total.own_sums);
    let mut result = EpochSummary::new(task, opts.top_k, total, start.elapsed().as_secs_f64());
    (result.data_wait_s, result.grad_norm, result.steps) = (waited, norms.read(), steps);
    result.user_metrics = user_metrics;
    result.max_memory = peaks.read(opts)?;
    if resumed {
        let trained: f64 = opts.strategy.gather_f64(trained_here)?.iter().sum();
        result.img_per_s = trained / result.seconds.max(1e-9);
    }
    progress.finish(&result.to_string());
    Ok(result)
}

/// Evaluates `model` (eval mode, no gradients) over `loader`: the exact loss and the task's
/// metrics over the real samples (padding repeats of a `DistributedSampler` are excluded),
/// and for classification the confusion matrix.
pub fn evaluate<D: Dataset + 'static>(
    model: &dyn ModuleT,
    loader: &mut DataLoader<D>,
    loss_fn: &dyn Loss,
    opts: &EpochOptions,
) -> Result<EpochSummary> {
    evaluate_step(&ModelStep { model, loss: loss_fn }, loader, opts)
}

/// [`evaluate`] for a step of one's own ([`TrainStep::eval_step`], called without gradients):
/// the exact loss and the task's metrics of its outputs over the real samples.
pub fn evaluate_step<D: Dataset + 'static>(
    step: &dyn TrainStep,
    loader: &mut DataLoader<D>,
    opts: &EpochOptions,
) -> Result<EpochSummary> {
    let start = Instant::now();
    let classes = loader.dataset().classes().len();
    let task = task_of(step.task(), loader.dataset());
    let mut progress = opts.begin_progress("eval", loader.len());
    let sums = TaskSums { task, top_k: opts.top_k };
    let mut running = DeviceMetrics::for_task(opts.device, &RunningMetrics::default(), sums);
    let mut own = metric_sums::MetricSums::new(opts.metrics);
    let (mut preds, mut truths) = (Vec::new(), Vec::new());
    let mut batches = Timed::new(loader.iter());
    for batch in &mut batches {
        let batch = batch?;
        let _range = phase_range(phase::EVAL_STEP);
        let keep: Vec<i64> =
            (0..batch.len() as i64).filter(|&k| !batch.is_padding[k as usize]).collect();
        let keep = Tensor::from_slice(&keep).to_device(opts.device);
        let (x, y, extra_inputs) = step_inputs(opts, &batch);
        let inputs = StepBatch { images: &x, target: &y, extra_inputs: &extra_inputs, task };
        let (logits, losses) = opts.precision.run(opts.device, || {
            tch::no_grad(|| -> Result<(Tensor, Tensor)> {
                let out = step.eval_step(&inputs)?;
                check_batch(task, opts.top_k, &out.output, &y)?;
                Ok((out.output.index_select(0, &keep), out.loss.index_select(0, &keep)))
            })
        })??;
        let weights = step.loss_weights(&inputs).map(|w| w.index_select(0, &keep));
        let y = y.index_select(0, &keep);
        running.add_loss_sum_weighted(&losses.sum(Kind::Double), &logits, &y, weights.as_ref());
        own.add(&logits, &y)?;
        if task == Task::Classification {
            // Predictions stay on the device until the epoch ends (one copy, not one per batch).
            preds.push(logits.argmax(1, false));
            truths.push(y);
        }
        progress.advance(batch.len(), &mut || running.read().loss());
    }
    let local = running.read();
    let to_cpu = |t: Tensor| t.to_device(Device::Cpu);
    let total = opts.strategy.reduce_metrics(local)?;
    let user_metrics = own.finish(opts.strategy)?;
    let empty = || Tensor::zeros([0], (Kind::Int64, Device::Cpu));
    let confusion = if task == Task::Classification {
        let (p, t) = if preds.is_empty() {
            (empty(), empty())
        } else {
            (to_cpu(Tensor::cat(&preds, 0)), to_cpu(Tensor::cat(&truths, 0)))
        };
        let (p, t) = opts.strategy.gather_labels(p, t)?;
        let mut confusion = ConfusionMatrix::new(classes);
        confusion.add(&p, &t);
        Some(confusion)
    } else {
        None
    };
    let waited = opts.strategy.gather_f64(batches.waited_s())?;
    let mut result = EpochSummary::new(task, opts.top_k, total, start.elapsed().as_secs_f64());
    (result.data_wait_s, result.confusion, result.user_metrics) = (waited, confusion, user_metrics);
    progress.finish(&result.to_string());
    Ok(result)
}
