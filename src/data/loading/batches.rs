//! The iteration behind [`DataLoader::iter`](crate::data::DataLoader::iter): worker threads that
//! load, augment and stack the epoch's samples ahead of the consumer (bounded prefetch), sharing
//! out each batch's samples (see [`batch_assembly`](super::batch_assembly)), and the iterator
//! that hands the batches out in order, moving them to the device; a worker's error (or a
//! panic in the data set) ends the iteration as an `Err` item.
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use tch::{Device, Kind, Tensor};

use crate::transforms::MixUpCutMix;

use super::batch_assembly::{load_batch, load_sample, Assembly, BatchMix, CpuBatch};
use crate::data::{Batch, Dataset};
use crate::{Error, Result};

/// Each batch of an epoch as its (sample index, is padding) pairs, in order.
pub(crate) type Plans = Vec<Vec<(usize, bool)>>;

/// What the workers share: the next sample to claim (its position in the epoch's plans,
/// flattened), how far the consumer has got, and the batches under construction.
struct Shared {
    next: AtomicUsize,
    /// The position of each batch's first sample, and the epoch's sample count at the end.
    starts: Vec<usize>,
    consumed: Mutex<usize>,
    wake: Condvar,
    stop: AtomicBool,
    building: Vec<Mutex<Option<Assembly>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A worker: claims the epoch's samples in order, at most `ahead` batches past the consumer,
/// and sends each batch once its last sample is in. With a CUDA `device` it makes that device
/// current (as torch's pin-memory thread does) and pins the batches it finishes.
fn worker(
    dataset: &dyn Dataset,
    plans: &[Vec<(usize, bool)>],
    shared: &Shared,
    tx: &mpsc::Sender<(usize, Result<CpuBatch>)>,
    stream: (u64, u64),
    ahead: usize,
    (device, mix): (Device, Option<&MixUpCutMix>),
) {
    let pin = device.is_cuda();
    if let Device::Cuda(i) = device {
        // Pinning works without it (the host allocator picks a GPU with a context); this only
        // keeps the thread off GPU 0 where another GPU is the loader's.
        let _ = crate::shim::set_cuda_device(i);
    }
    let total = *shared.starts.last().unwrap_or(&0);
    loop {
        let pos = shared.next.fetch_add(1, Ordering::SeqCst);
        if pos >= total || shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let b = shared.starts.partition_point(|&s| s <= pos) - 1;
        let k = pos - shared.starts[b];
        {
            let mut consumed = lock(&shared.consumed);
            while b >= *consumed + ahead && !shared.stop.load(Ordering::SeqCst) {
                consumed = shared.wake.wait(consumed).unwrap_or_else(|e| e.into_inner());
            }
        }
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let sample = load_sample(dataset, plans[b][k].0, stream);
        let slot = lock(&shared.building[b])
            .get_or_insert_with(|| Assembly::new(plans[b].len()))
            .slot(k, sample);
        if let Some((slot, img)) = slot {
            slot.fill(&img);
        }
        let finished = {
            let mut building = lock(&shared.building[b]);
            match building.as_mut().map(Assembly::done) {
                Some(true) => building.take(),
                _ => None,
            }
        };
        if let Some(batch) = finished {
            let mix = mix.map(|mix| BatchMix { mix, stream, position: b });
            if tx.send((b, batch.finish(dataset, &plans[b], pin, mix))).is_err() {
                return;
            }
        }
    }
}

/// The iterator returned by [`DataLoader::iter`](crate::data::DataLoader::iter).
pub struct Batches {
    plans: Arc<Plans>,
    next: usize,
    pending: BTreeMap<usize, Result<CpuBatch>>,
    rx: mpsc::Receiver<(usize, Result<CpuBatch>)>,
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    inline: Option<(Arc<dyn Dataset>, u64, u64)>,
    device: Device,
    mix: Option<Arc<MixUpCutMix>>,
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
        (device, mix): (Device, Option<Arc<MixUpCutMix>>),
    ) -> Batches {
        let skip = skip.min(plans.len());
        let plans = Arc::new(plans);
        let starts: Vec<usize> = std::iter::once(0)
            .chain(plans.iter().scan(0, |n, p| {
                *n += p.len();
                Some(*n)
            }))
            .collect();
        let shared = Arc::new(Shared {
            next: AtomicUsize::new(starts[skip]),
            starts,
            consumed: Mutex::new(skip),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
            building: plans.iter().map(|_| Mutex::new(None)).collect(),
        });
        let (tx, rx) = mpsc::channel();
        let mut workers = Vec::new();
        let ahead = num_workers * prefetch;
        for _ in 0..num_workers {
            let (dataset, plans, shared, tx, mix) =
                (dataset.clone(), plans.clone(), shared.clone(), tx.clone(), mix.clone());
            workers.push(std::thread::spawn(move || {
                let place = (device, mix.as_deref());
                worker(&*dataset, &plans, &shared, &tx, (seed, epoch), ahead, place)
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
            mix,
            failed: false,
        }
    }

    fn to_batch(&self, b: usize, cpu: CpuBatch) -> Result<Batch> {
        let plan = &self.plans[b];
        let mut images = cpu.images;
        let mut labels = Tensor::from_slice(&cpu.labels);
        let mut targets =
            cpu.targets.map(|(v, width)| Tensor::from_slice(&v).view([-1, width as i64]));
        let mut extra_inputs = cpu.extra_inputs;
        if self.device != Device::Cpu {
            let to = |t: Tensor, kind| -> Result<Tensor> {
                Ok(crate::shim::pin_memory(&t)?.to_device_(self.device, kind, true, false))
            };
            images = if cpu.pinned {
                images.to_device_(self.device, Kind::Float, true, false)
            } else {
                to(images, Kind::Float)?
            };
            labels = to(labels, Kind::Int64)?;
            targets = targets.map(|t| to(t, Kind::Float)).transpose()?;
            extra_inputs = if cpu.pinned {
                let to = |t: Tensor| t.to_device_(self.device, t.kind(), true, false);
                extra_inputs.into_iter().map(to).collect()
            } else {
                extra_inputs
                    .into_iter()
                    .map(|t| to(t.shallow_clone(), t.kind()))
                    .collect::<Result<_>>()?
            };
        }
        Ok(Batch {
            images,
            labels,
            targets,
            extra_inputs,
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
            let mix = self.mix.as_deref().map(|mix| BatchMix {
                mix,
                stream: (*seed, *epoch),
                position: b,
            });
            load_batch(&**dataset, &self.plans[b], (*seed, *epoch), mix)
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
        *lock(&self.shared.consumed) = self.next;
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
