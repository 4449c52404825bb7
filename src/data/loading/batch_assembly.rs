//! One batch put together from its samples as they finish, in any order: the loader's worker
//! threads share out the samples of a batch (so an epoch's first batch is ready after about one
//! sample's decode, not a whole batch's), each sample's image goes straight into its slot of the
//! batch tensor, and the batch's error, if any, is the one a sample-by-sample pass would have met
//! first. A finished batch bound for a GPU is copied to page-locked memory by the worker that
//! finished it, as torch's pin-memory thread does, off the training loop's thread.
use tch::{Device, Kind, Tensor};

use super::extra_inputs::ExtraInputs;
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
    /// The stacked extra inputs ([`Dataset::extra_inputs`]), `[B, ...]` each.
    pub(crate) extra_inputs: Vec<Tensor>,
    /// `images` (and the extra inputs) in page-locked memory (a worker pinned it for a CUDA device).
    pub(crate) pinned: bool,
}

/// A loaded sample: its image, label and extra inputs.
pub(crate) type Loaded = (TensorImage, i64, Vec<Tensor>);

/// Sample `index` of the epoch `(seed, epoch)`: its augmentation stream depends on these three
/// alone, so which thread loads it does not matter (its extra inputs draw from the same stream
/// after its image). A panic in the data set becomes an error.
pub(crate) fn load_sample(
    dataset: &dyn Dataset,
    index: usize,
    (seed, epoch): (u64, u64),
) -> Result<Loaded> {
    unless_panicked(
        || format!("loading sample {index}"),
        || {
            let mut rng = aug_rng(seed, epoch, index as u64);
            let (image, label) = dataset.get(index, &mut rng)?;
            Ok((image, label, dataset.extra_inputs(index, &mut rng)?))
        },
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
    extras: ExtraInputs,
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
            extras: ExtraInputs::new(len),
            left: len,
        }
    }

    /// Records sample `k`'s outcome and returns where its image goes, with the image: `None`
    /// when it failed or its shape differs from the batch tensor's (the error is raised by
    /// [`finish`](Self::finish)). The batch tensor is allocated by the first sample to arrive.
    pub(crate) fn slot(&mut self, k: usize, sample: Result<Loaded>) -> Option<(Slot, TensorImage)> {
        let (img, label, extras) = match sample {
            Ok(s) => s,
            Err(e) => {
                self.errors[k] = Some(e);
                return None;
            }
        };
        let shape = img.shape();
        self.shapes[k] = Some(shape);
        self.labels[k] = label;
        self.extras.set(k, extras);
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
        let indices: Vec<usize> = plan.iter().map(|p| p.0).collect();
        let extra_inputs = self.extras.stack(&indices)?;
        let images = self
            .images
            .map(|(t, _)| t)
            .unwrap_or_else(|| Tensor::empty([0], (Kind::Float, Device::Cpu)));
        let labels = self.labels;
        let mut batch = CpuBatch { images, labels, targets, extra_inputs, pinned: false };
        if let Some(mix) = mix {
            batch = mix.apply(batch, plan)?;
        }
        if pin {
            batch.images = crate::shim::pin_memory(&batch.images)?;
            let pinned: Result<Vec<Tensor>> =
                batch.extra_inputs.iter().map(crate::shim::pin_memory).collect();
            batch.extra_inputs = pinned?;
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
    /// in `targets`, the most probable class in `labels`; its extra inputs as they are.
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
        let (targets, extra_inputs) = (Some((values, width)), batch.extra_inputs);
        Ok(CpuBatch { images, labels, targets, extra_inputs, pinned: false })
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
#[path = "batch_assembly_tests.rs"]
mod tests;
