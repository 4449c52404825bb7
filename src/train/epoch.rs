//! One epoch of training or evaluation over a `DataLoader`, returning an exact per-sample
//! summary (loss, accuracy, samples, seconds, img/s).
//!
//! A step queues its work on the device and moves on: the running loss and correct counts stay
//! on the device ([`DeviceMetrics`]) and are read only when progress is printed, when `on_step`
//! asks for them (a checkpoint) and at the epoch's end.
use std::time::Instant;

use tch::nn::ModuleT;
use tch::{Device, Kind, Tensor};

use super::clip::NormMean;
use super::device_metrics::DeviceMetrics;
use super::epoch_options::{EpochOptions, StepInfo};
use super::loss::CrossEntropyLoss;
use super::metrics::{ConfusionMatrix, RunningMetrics};
use super::optim::Optimizer;
use super::timing::{data_wait_note, Timed};
use crate::data::{DataLoader, Dataset};
use crate::Result;

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
    /// Samples per second over all ranks (in a resumed epoch, of the samples trained since the
    /// resume: `samples` also counts the restored ones).
    pub img_per_s: f64,
    /// Seconds each rank (in rank order) waited for its data loader during the epoch.
    pub data_wait_s: Vec<f64>,
    /// Filled by [`evaluate`]: rows are true classes, columns predictions (all ranks).
    pub confusion: Option<ConfusionMatrix>,
    /// With norm clipping ([`EpochOptions::clip_grad`]): the mean over the epoch's optimizer
    /// steps of the total gradient norm before clipping (what `clip_grad_norm_` returns).
    pub grad_norm: Option<f64>,
    /// Optimizer steps the epoch took (one per accumulation window; 0 from [`evaluate`]): what
    /// a hand-written loop passes to [`Checkpointer::add_steps`](crate::checkpoint::Checkpointer::add_steps).
    pub steps: u64,
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
        if let Some(n) = self.grad_norm {
            write!(f, "  grad norm {n:.3}")?;
        }
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
        grad_norm: None,
        steps: 0,
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
    // A resumed epoch (the same batches skipped on every rank) counts only what it trains now in
    // its rate: the restored metrics hold samples an earlier run trained in its own time.
    let resumed = loader.batches_to_skip() > 0;
    progress.resume_at(loader.batches_to_skip());
    let mut running = DeviceMetrics::new(opts.device, opts.start_metrics);
    if opts.step_logging.is_some() {
        running = running.with_step_records();
    }
    let deliver_steps = |running: &DeviceMetrics| -> Result<()> {
        match &opts.step_logging {
            Some(log) => {
                let ready = running.take_steps();
                if ready.is_empty() {
                    Ok(())
                } else {
                    (log.on_read)(&ready)
                }
            }
            None => Ok(()),
        }
    };
    let k = opts.accumulate;
    if k == 0 {
        return Err(crate::Error::InvalidArgument(
            "EpochOptions::accumulate must be at least 1".into(),
        ));
    }
    let total_batches = loader.len();
    let mut norms = NormMean::default();
    let mut steps = 0;
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
            let mut step_norm = None;
            if let Some(clip) = &opts.clip_grad {
                // torch: scaler.unscale_(optimizer) before clipping, so the bound applies to
                // the true gradients; the scaler's step then skips its own unscale.
                if let Some(scaler) = opts.grad_scaler {
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
            steps += 1;
            if let Some(log) = &opts.step_logging {
                let step = log.steps_before + steps;
                running.end_step(step, log.epoch, position + 1, lr_used, step_norm.as_ref());
            }
            if let Some(f) = opts.lr_after_step {
                f(optimizer)?;
            }
            if let Some(f) = opts.on_step {
                f(&StepInfo { batches_done: position + 1, optimizer, running: &running })?;
            }
            deliver_steps(&running)?;
        }
    }
    let waited = opts.hooks.gather_f64(batches.waited_s())?;
    let local = running.read();
    deliver_steps(&running)?;
    let trained_here = local.count.saturating_sub(opts.start_metrics.count) as f64;
    let total = opts.hooks.reduce_metrics(local)?;
    let mut result = summary(total, start.elapsed().as_secs_f64(), waited, None);
    (result.grad_norm, result.steps) = (norms.read(), steps);
    if resumed {
        let trained: f64 = opts.hooks.gather_f64(trained_here)?.iter().sum();
        result.img_per_s = trained / result.seconds.max(1e-9);
    }
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
