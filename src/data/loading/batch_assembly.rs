//! One batch put together from its samples as they finish, in any order: the loader's worker
//! threads share out the samples of a batch (so an epoch's first batch is ready after about one
//! sample's decode, not a whole batch's), each sample's image goes straight into its slot of the
//! batch tensor, and the batch's error, if any, is the one a sample-by-sample pass would have met
//! first. A finished batch bound for a GPU is copied to page-locked memory by the worker that
//! finished it, as torch's pin-memory thread does, off the training loop's thread.
use tch::{Device, Kind, Tensor};

use crate::data::Dataset;
use crate::transforms::{aug_rng, batch_rng, MixUpCutMix, TensorImage};
use crate::{Error, Result};

/// Decoded, augmented and stacked samples of one batch, built by the worker threads (so the
/// allocation and copy of the batch tensor happen in parallel, not in the consumer).
pub(crate) struct CpuBatch {
    pub(crate) images: Tensor,
    pub(crate) labels: Vec<i64>,
    /// The float targets, row-major `[B, T]`, and `T` (data sets with [`Dataset::target`]).
    pub(crate) targets: Option<(Vec<f32>, usize)>,
    /// `images` in page-locked memory (a worker pinned it for a CUDA device).
    pub(crate) pinned: bool,
}

/// Sample `index` of the epoch `(seed, epoch)`: its augmentation stream depends on these three
/// alone, so which thread loads it does not matter. A panic in the data set becomes an error.
pub(crate) fn load_sample(
    dataset: &dyn Dataset,
    index: usize,
    (seed, epoch): (u64, u64),
) -> Result<(TensorImage, i64)> {
    unless_panicked(
        || format!("loading sample {index}"),
        || dataset.get(index, &mut aug_rng(seed, epoch, index as u64)),
    )
}

/// Runs the data set's code `f`; a panic in it becomes an error saying what it was `doing`.
fn unless_panicked<T>(doing: impl FnOnce() -> String, f: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|_| Err(Error::Loader(format!("the data set panicked {}", doing()))))
}

/// Where a sample's image goes: its slot in the batch tensor (see [`Assembly::slot`]).
pub(crate) struct Slot {
    ptr: *mut f32,
    len: usize,
}

// SAFETY: a slot is one sample's disjoint part of a batch tensor that outlives the copy (the
// assembly holding the tensor is finished only after every sample's copy is counted).
unsafe impl Send for Slot {}

impl Slot {
    /// Copies the image's values into the slot.
    pub(crate) fn fill(self, img: &TensorImage) {
        debug_assert_eq!(img.data.len(), self.len);
        // SAFETY: `ptr..ptr+len` is this sample's slot of a live float tensor, written by this
        // thread alone (each sample of a batch is claimed once).
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }.copy_from_slice(&img.data);
    }
}

/// A batch under construction: one entry per sample of its plan.
pub(crate) struct Assembly {
    images: Option<(Tensor, [usize; 3])>,
    shapes: Vec<Option<[usize; 3]>>,
    errors: Vec<Option<Error>>,
    labels: Vec<i64>,
    left: usize,
}

impl Assembly {
    /// An empty batch of `len` samples.
    pub(crate) fn new(len: usize) -> Assembly {
        Assembly {
            images: None,
            shapes: vec![None; len],
            errors: (0..len).map(|_| None).collect(),
            labels: vec![0; len],
            left: len,
        }
    }

    /// Records sample `k`'s outcome and returns where its image goes, with the image: `None`
    /// when it failed or its shape differs from the batch tensor's (the error is raised by
    /// [`finish`](Self::finish)). The batch tensor is allocated by the first sample to arrive.
    pub(crate) fn slot(
        &mut self,
        k: usize,
        sample: Result<(TensorImage, i64)>,
    ) -> Option<(Slot, TensorImage)> {
        let (img, label) = match sample {
            Ok(s) => s,
            Err(e) => {
                self.errors[k] = Some(e);
                return None;
            }
        };
        let shape = img.shape();
        self.shapes[k] = Some(shape);
        self.labels[k] = label;
        let len = self.shapes.len() as i64;
        let (batch, batch_shape) = self.images.get_or_insert_with(|| {
            let [c, h, w] = shape.map(|d| d as i64);
            (Tensor::empty([len, c, h, w], (Kind::Float, Device::Cpu)), shape)
        });
        if shape != *batch_shape {
            return None;
        }
        let n = img.data.len();
        // SAFETY: in bounds, the tensor holds `len` samples of `n` floats; the pointer is only
        // written through while this assembly (which owns the tensor) lives.
        let ptr = unsafe { (batch.data_ptr() as *mut f32).add(k * n) };
        Some((Slot { ptr, len: n }, img))
    }

    /// Counts one sample as done (its slot filled, or it failed); true when it was the last.
    pub(crate) fn done(&mut self) -> bool {
        self.left -= 1;
        self.left == 0
    }

    /// The finished batch, or the error a pass over the samples in order meets first: a
    /// sample that failed to load, or one whose shape differs from the batch's first sample.
    /// With `pin`, the images go to page-locked memory (for a non-blocking copy to a GPU).
    pub(crate) fn finish(
        mut self,
        dataset: &dyn Dataset,
        plan: &[(usize, bool)],
        pin: bool,
        mix: Option<BatchMix>,
    ) -> Result<CpuBatch> {
        let first = self.shapes.first().copied().flatten();
        for (k, &(index, _)) in plan.iter().enumerate() {
            if let Some(e) = self.errors[k].take() {
                return Err(e);
            }
            if let (Some(shape), Some(first)) = (self.shapes[k], first) {
                if shape != first {
                    return Err(Error::Dataset(format!(
                        "sample {index} has shape {shape:?} but the batch has {first:?}: add a \
                         Resize/CenterCrop so all samples match"
                    )));
                }
            }
        }
        let targets = batch_targets(dataset, plan)?;
        let images = self
            .images
            .map(|(t, _)| t)
            .unwrap_or_else(|| Tensor::empty([0], (Kind::Float, Device::Cpu)));
        let mut batch = CpuBatch { images, labels: self.labels, targets, pinned: false };
        if let Some(mix) = mix {
            batch = mix.apply(batch, plan)?;
        }
        if pin {
            batch.images = crate::shim::pin_memory(&batch.images)?;
            batch.pinned = true;
        }
        Ok(batch)
    }
}

/// A batch transform ([`MixUpCutMix`]) with the batch's place: the epoch's (seed, epoch) and
/// the batch's position, which with its first sample key its random stream ([`batch_rng`]).
#[derive(Clone, Copy)]
pub(crate) struct BatchMix<'a> {
    pub(crate) mix: &'a MixUpCutMix,
    pub(crate) stream: (u64, u64),
    pub(crate) position: usize,
}

impl BatchMix<'_> {
    /// The batch mixed: its images, and its labels (or float targets) as class probabilities
    /// in `targets`, the most probable class in `labels`.
    fn apply(self, batch: CpuBatch, plan: &[(usize, bool)]) -> Result<CpuBatch> {
        let size = batch.images.size();
        let (Some(&first), [_, _, h, w]) = (plan.first(), size.as_slice()) else {
            return Ok(batch); // an empty batch
        };
        let (seed, epoch) = self.stream;
        let mut rng = batch_rng(seed, epoch, self.position as u64, first.0 as u64);
        let draw = self.mix.draw(&mut rng, *h, *w);
        let labels = match &batch.targets {
            Some((values, width)) => Tensor::from_slice(values).view([-1, *width as i64]),
            None => Tensor::from_slice(&batch.labels),
        };
        let (images, probabilities) = self.mix.apply(&draw, &batch.images, &labels)?;
        let labels = Vec::<i64>::try_from(probabilities.max_dim(1, false).1)?;
        let width = probabilities.size()[1] as usize;
        let values = Vec::<f32>::try_from(probabilities.flatten(0, -1))?;
        Ok(CpuBatch { images, labels, targets: Some((values, width)), pinned: false })
    }
}

/// Sample by sample in the calling thread (a loader without workers).
pub(crate) fn load_batch(
    dataset: &dyn Dataset,
    plan: &[(usize, bool)],
    stream: (u64, u64),
    mix: Option<BatchMix>,
) -> Result<CpuBatch> {
    let mut batch = Assembly::new(plan.len());
    for (k, &(index, _)) in plan.iter().enumerate() {
        let sample = load_sample(dataset, index, stream);
        let failed = sample.is_err();
        if let Some((slot, img)) = batch.slot(k, sample) {
            slot.fill(&img);
        }
        if failed {
            // The first failure in order is the batch's error: the rest need not load.
            return batch.finish(dataset, &plan[..=k], false, None);
        }
        batch.done();
    }
    batch.finish(dataset, plan, false, mix)
}

/// The batch's float targets (values, width per sample), if its data set has them.
fn batch_targets(
    dataset: &dyn Dataset,
    plan: &[(usize, bool)],
) -> Result<Option<(Vec<f32>, usize)>> {
    let indices = || plan.iter().map(|p| p.0).collect::<Vec<usize>>();
    unless_panicked(
        || format!("reading the targets of samples {:?}", indices()),
        || {
            let mut targets = None;
            for (k, &(index, _)) in plan.iter().enumerate() {
                add_target(dataset, index, k, &mut targets)?;
            }
            Ok(targets)
        },
    )
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

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::{Arc, Condvar, Mutex};
    use std::thread::ThreadId;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::data::DataLoader;
    use crate::transforms::AugRng;

    /// A data set of `len` 1x2x2 images whose `get` can fail, panic, change shape, sleep, or
    /// wait until `rendezvous` threads are inside `get` at once (and whose `target` can panic);
    /// it records which thread loaded each sample.
    #[derive(Default)]
    struct Probe {
        len: usize,
        fail: Vec<usize>,
        panic: Vec<usize>,
        panic_target: Vec<usize>,
        wide: Vec<usize>,
        slow: Vec<usize>,
        rendezvous: usize,
        inside: Mutex<HashSet<ThreadId>>,
        met: Condvar,
        loaded_by: Mutex<Vec<(usize, ThreadId)>>,
    }

    impl Dataset for Probe {
        fn len(&self) -> usize {
            self.len
        }
        fn get(&self, index: usize, _rng: &mut AugRng) -> Result<(TensorImage, i64)> {
            let me = std::thread::current().id();
            self.loaded_by.lock().unwrap().push((index, me));
            if self.rendezvous > 0 {
                // Wait (10 s at most) until enough threads are loading at once.
                let mut inside = self.inside.lock().unwrap();
                inside.insert(me);
                self.met.notify_all();
                let deadline = Instant::now() + Duration::from_secs(10);
                while inside.len() < self.rendezvous && Instant::now() < deadline {
                    inside = self.met.wait_timeout(inside, Duration::from_millis(50)).unwrap().0;
                }
            }
            if self.slow.contains(&index) {
                std::thread::sleep(Duration::from_millis(200));
            }
            if self.fail.contains(&index) {
                return Err(Error::Dataset(format!("sample {index} is unreadable")));
            }
            assert!(!self.panic.contains(&index), "the probe panics at {index}");
            let width = if self.wide.contains(&index) { 3 } else { 2 };
            let data = vec![index as f32; 2 * width];
            Ok((TensorImage { channels: 1, height: 2, width, data }, index as i64 % 3))
        }
        fn label(&self, index: usize) -> i64 {
            index as i64 % 3
        }
        fn classes(&self) -> Vec<String> {
            vec!["a".into(), "b".into(), "c".into()]
        }
        fn target(&self, index: usize) -> Option<Vec<f32>> {
            assert!(!self.panic_target.contains(&index), "the probe's target panics at {index}");
            None
        }
    }

    fn first_error(probe: Probe, workers: usize) -> String {
        let mut loader = DataLoader::new(probe, 4).num_workers(workers);
        let results: Vec<_> = loader.iter().collect();
        assert!(results.last().unwrap().is_err(), "the iteration ends at the failing batch");
        results.into_iter().find_map(|r| r.err()).unwrap().to_string()
    }

    #[test]
    fn the_first_batch_is_shared_out_among_the_workers() {
        // Each `get` waits until two threads are loading: one thread per batch would load
        // batch 0's samples alone and never meet a second one inside batch 0.
        let probe = Arc::new(Probe { len: 12, rendezvous: 2, ..Probe::default() });
        let mut loader = DataLoader::from_arc(probe.clone(), 4).num_workers(4);
        let first = loader.iter().next().unwrap().unwrap();
        assert_eq!(first.indices, [0, 1, 2, 3]);
        let threads: HashSet<ThreadId> = probe
            .loaded_by
            .lock()
            .unwrap()
            .iter()
            .filter(|(index, _)| *index < 4)
            .map(|(_, t)| *t)
            .collect();
        assert!(threads.len() >= 2, "batch 0 was loaded by {} thread(s)", threads.len());
        let values: Vec<f32> = Vec::try_from(first.images.flatten(0, -1)).unwrap();
        let expected: Vec<f32> = (0..4).flat_map(|i| [i as f32; 4]).collect();
        assert_eq!(values, expected, "each sample in its own slot");
        assert_eq!(Vec::<i64>::try_from(&first.labels).unwrap(), [0, 1, 2, 0]);
    }

    #[test]
    fn a_batch_fails_with_its_first_failing_sample_in_order() {
        // Samples 5 and 6 of batch 1 fail; 5 is slow, so 6's error comes in first.
        for workers in [0, 1, 4] {
            let probe = Probe { len: 12, fail: vec![5, 6], slow: vec![5], ..Probe::default() };
            let err = first_error(probe, workers);
            assert!(err.contains("sample 5 is unreadable"), "{workers} workers: {err}");
        }
        // A shape that differs from the batch's first sample, before a failing one.
        for workers in [0, 4] {
            let probe = Probe { len: 8, wide: vec![6], fail: vec![7], ..Probe::default() };
            let err = first_error(probe, workers);
            assert!(
                err.contains("sample 6 has shape [1, 2, 3] but the batch has [1, 2, 2]"),
                "{err}"
            );
        }
        // The batch's first sample arrives last and differs from the others.
        let probe = Probe { len: 4, wide: vec![1, 2, 3], slow: vec![0], ..Probe::default() };
        let err = first_error(probe, 4);
        assert!(err.contains("sample 1 has shape [1, 2, 3] but the batch has [1, 2, 2]"), "{err}");
    }

    #[test]
    fn a_panic_in_the_data_set_is_an_error_naming_the_sample() {
        for workers in [0, 3] {
            let err = first_error(Probe { len: 8, panic: vec![6], ..Probe::default() }, workers);
            assert!(err.contains("panicked loading sample 6"), "{workers} workers: {err}");
            let probe = Probe { len: 8, panic_target: vec![5], ..Probe::default() };
            let err = first_error(probe, workers);
            assert!(err.contains("targets of samples [4, 5, 6, 7]"), "{workers} workers: {err}");
        }
    }
}
