//! The iteration behind [`DataLoader::iter`](super::DataLoader::iter): worker threads that
//! decode, augment and stack whole batches ahead of the consumer (bounded prefetch), and the
//! iterator that hands them out in order, moving them to the device; a worker's error (or
//! panic) ends the iteration as an `Err` item.
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use tch::{Device, Kind, Tensor};

use super::{Batch, Dataset};
use crate::transforms::aug_rng;
use crate::{Error, Result};

/// Each batch of an epoch as its (sample index, is padding) pairs, in order.
pub(crate) type Plans = Vec<Vec<(usize, bool)>>;

struct Shared {
    next: AtomicUsize,
    consumed: Mutex<usize>,
    wake: Condvar,
    stop: AtomicBool,
}

/// Decoded, augmented and stacked samples of one batch, built by a worker thread (so the
/// allocation and copy of the batch tensor happen in parallel, not in the consumer).
struct CpuBatch {
    images: Tensor,
    labels: Vec<i64>,
    /// The float targets, row-major `[B, T]`, and `T` (data sets with [`Dataset::target`]).
    targets: Option<(Vec<f32>, usize)>,
}

fn load_batch(
    dataset: &dyn Dataset,
    plan: &[(usize, bool)],
    seed: u64,
    epoch: u64,
) -> Result<CpuBatch> {
    let mut images: Option<(Tensor, [usize; 3])> = None;
    let mut labels = Vec::with_capacity(plan.len());
    let mut targets: Option<(Vec<f32>, usize)> = None;
    for (k, &(index, _)) in plan.iter().enumerate() {
        let (img, label) = dataset.get(index, &mut aug_rng(seed, epoch, index as u64))?;
        let shape = img.shape();
        let (batch, batch_shape) = images.get_or_insert_with(|| {
            let [c, h, w] = shape;
            (
                Tensor::empty(
                    [plan.len() as i64, c as i64, h as i64, w as i64],
                    (Kind::Float, Device::Cpu),
                ),
                shape,
            )
        });
        if shape != *batch_shape {
            return Err(Error::Dataset(format!(
                "sample {index} has shape {shape:?} but the batch has {batch_shape:?}: add a Resize/CenterCrop so all samples match"
            )));
        }
        let n = img.data.len();
        // SAFETY: `batch` is a contiguous float tensor of plan.len() * n elements that only this
        // thread holds; slot k is in bounds.
        let slot =
            unsafe { std::slice::from_raw_parts_mut((batch.data_ptr() as *mut f32).add(k * n), n) };
        slot.copy_from_slice(&img.data);
        labels.push(label);
        add_target(dataset, index, k, &mut targets)?;
    }
    let images =
        images.map(|(t, _)| t).unwrap_or_else(|| Tensor::empty([0], (Kind::Float, Device::Cpu)));
    Ok(CpuBatch { images, labels, targets })
}

/// Appends sample `index`'s float target (the `k`-th of its batch) to the batch's, checking
/// that every sample has one of the same length.
fn add_target(
    dataset: &dyn Dataset,
    index: usize,
    k: usize,
    targets: &mut Option<(Vec<f32>, usize)>,
) -> Result<()> {
    let target = dataset.target(index);
    match (target, targets.as_mut()) {
        (None, None) => Ok(()),
        (Some(t), None) if k == 0 => {
            let width = t.len();
            *targets = Some((t, width));
            Ok(())
        }
        (Some(t), Some((values, width))) if t.len() == *width => {
            values.extend_from_slice(&t);
            Ok(())
        }
        (t, have) => Err(Error::Dataset(format!(
            "sample {index} has a target of {} values, but the batch's first sample has {}: \
             every sample of a data set with float targets needs one of the same length",
            t.map_or("no".to_string(), |t| t.len().to_string()),
            have.map_or("none".to_string(), |(_, w)| w.to_string()),
        ))),
    }
}

fn worker(
    dataset: &dyn Dataset,
    plans: &[Vec<(usize, bool)>],
    shared: &Shared,
    tx: &mpsc::Sender<(usize, Result<CpuBatch>)>,
    seed: u64,
    epoch: u64,
    ahead: usize,
) {
    loop {
        let b = shared.next.fetch_add(1, Ordering::SeqCst);
        if b >= plans.len() || shared.stop.load(Ordering::SeqCst) {
            return;
        }
        {
            let mut consumed = shared.consumed.lock().unwrap_or_else(|e| e.into_inner());
            while b >= *consumed + ahead && !shared.stop.load(Ordering::SeqCst) {
                consumed = shared.wake.wait(consumed).unwrap_or_else(|e| e.into_inner());
            }
        }
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            load_batch(dataset, &plans[b], seed, epoch)
        }))
        .unwrap_or_else(|_| {
            Err(Error::Loader(format!("a worker thread panicked while loading batch {b}")))
        });
        if tx.send((b, result)).is_err() {
            return;
        }
    }
}

/// The iterator returned by [`DataLoader::iter`](super::DataLoader::iter).
pub struct Batches {
    plans: Arc<Plans>,
    next: usize,
    pending: BTreeMap<usize, Result<CpuBatch>>,
    rx: mpsc::Receiver<(usize, Result<CpuBatch>)>,
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    inline: Option<(Arc<dyn Dataset>, u64, u64)>,
    device: Device,
    failed: bool,
}

impl Batches {
    /// Starts iterating over `plans` from batch `skip`: `num_workers` threads (each at most
    /// `prefetch` batches ahead per thread), or loading in the caller's thread when 0. `stream`
    /// is the (seed, epoch) of the augmentations; batches end up on `device`.
    pub(crate) fn start(
        dataset: Arc<dyn Dataset>,
        plans: Plans,
        skip: usize,
        (num_workers, prefetch): (usize, usize),
        (seed, epoch): (u64, u64),
        device: Device,
    ) -> Batches {
        let skip = skip.min(plans.len());
        let plans = Arc::new(plans);
        let shared = Arc::new(Shared {
            next: AtomicUsize::new(skip),
            consumed: Mutex::new(skip),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let (tx, rx) = mpsc::channel();
        let mut workers = Vec::new();
        let ahead = num_workers * prefetch;
        for _ in 0..num_workers {
            let (dataset, plans, shared, tx) =
                (dataset.clone(), plans.clone(), shared.clone(), tx.clone());
            workers.push(std::thread::spawn(move || {
                worker(&*dataset, &plans, &shared, &tx, seed, epoch, ahead)
            }));
        }
        let inline = (num_workers == 0).then_some((dataset, seed, epoch));
        Batches {
            plans,
            next: skip,
            pending: BTreeMap::new(),
            rx,
            shared,
            workers,
            inline,
            device,
            failed: false,
        }
    }

    fn to_batch(&self, b: usize, cpu: CpuBatch) -> Result<Batch> {
        let plan = &self.plans[b];
        let mut images = cpu.images;
        let mut labels = Tensor::from_slice(&cpu.labels);
        let mut targets =
            cpu.targets.map(|(v, width)| Tensor::from_slice(&v).view([-1, width as i64]));
        if self.device != Device::Cpu {
            let to = |t: Tensor, kind| -> Result<Tensor> {
                Ok(crate::shim::pin_memory(&t)?.to_device_(self.device, kind, true, false))
            };
            images = to(images, Kind::Float)?;
            labels = to(labels, Kind::Int64)?;
            targets = targets.map(|t| to(t, Kind::Float)).transpose()?;
        }
        Ok(Batch {
            images,
            labels,
            targets,
            indices: plan.iter().map(|p| p.0).collect(),
            is_padding: plan.iter().map(|p| p.1).collect(),
            position: b,
        })
    }
}

impl Iterator for Batches {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Result<Batch>> {
        if self.failed || self.next >= self.plans.len() {
            return None;
        }
        let b = self.next;
        let result = if let Some((dataset, seed, epoch)) = &self.inline {
            load_batch(&**dataset, &self.plans[b], *seed, *epoch)
        } else {
            loop {
                if let Some(r) = self.pending.remove(&b) {
                    break r;
                }
                match self.rx.recv() {
                    Ok((i, r)) => {
                        self.pending.insert(i, r);
                    }
                    Err(_) => {
                        break Err(Error::Loader("worker threads stopped unexpectedly".into()))
                    }
                }
            }
        };
        self.next += 1;
        *self.shared.consumed.lock().unwrap_or_else(|e| e.into_inner()) = self.next;
        self.shared.wake.notify_all();
        match result.and_then(|cpu| self.to_batch(b, cpu)) {
            Ok(batch) => Some(Ok(batch)),
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.plans.len().saturating_sub(self.next);
        (left, Some(left))
    }
}

impl Drop for Batches {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.wake.notify_all();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}
