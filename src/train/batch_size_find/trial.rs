//! The finder's trials: a few optimizer steps at a batch size through [`train_epoch_step`],
//! an out-of-memory error or panic caught and told apart from any other, the peak memory
//! measured; then the loader, the weights, the optimizer and the random generator put back.
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};

use tch::nn::{ModuleT, VarStore};

use super::memory::PeakMemory;
use super::{is_oom_error, search, BatchSizeFind, BatchSizeFindOptions, BatchSizeTrial};
use crate::data::{DataLoader, Dataset};
use crate::error::panic_message;
use crate::train::restore_point::RestorePoint;
use crate::train::{train_epoch_step, EpochOptions, Loss, ModelStep, Optimizer, TrainStep};
use crate::{Error, Result};

/// Finds the largest batch size whose training steps fit in memory (a step's out-of-memory
/// error, or a peak above [`max_memory`](BatchSizeFindOptions::max_memory), means it does not):
/// `model` trained with `loss_fn` on
/// `loader`'s data under `opts` (device, precision, CUDA graph as for training; one process),
/// then the loader's batch size, batch limit and epoch, the weights, the optimizer and the CPU
/// random generator as they were. Set the loader's batch size to the answer yourself
/// ([`DataLoader::set_batch_size`]). Errors: [`Error::InvalidArgument`] for more than one
/// process, a CPU run without [`max_memory`](BatchSizeFindOptions::max_memory), zero settings or
/// no batch size fitting; any error of a trial that is not out of memory (a panic in it as
/// [`Error::Panicked`]), after everything is put back.
///
/// ```no_run
/// use trainbook::prelude::*;
/// use trainbook::train::{find_batch_size, BatchSizeFindOptions, CrossEntropyLoss, EpochOptions};
/// # fn main() -> trainbook::Result<()> {
/// let data = Mnist::new("data/mnist", true)?.with_transform(compose![ToTensor]);
/// let mut loader = DataLoader::new(data, 64);
/// let vs = VarStore::new(Device::Cpu);
/// let net = MnistNet::new(&vs.root());
/// let mut opt = Optimizer::adam(&vs, 1e-3);
/// // On the CPU: the largest batch whose steps keep the process within 2 GiB.
/// let find = BatchSizeFindOptions { max_memory: Some(2 << 30), ..Default::default() };
/// let opts = EpochOptions::on(Device::Cpu);
/// let found = find_batch_size((&vs, &net), &mut loader, &mut opt, &CrossEntropyLoss::new(), opts, find)?;
/// loader.set_batch_size(found.batch_size);
/// # Ok(()) }
/// ```
pub fn find_batch_size<D: Dataset + 'static>(
    (vs, model): (&VarStore, &dyn ModuleT),
    loader: &mut DataLoader<D>,
    optimizer: &mut Optimizer,
    loss_fn: &dyn Loss,
    opts: EpochOptions,
    find: BatchSizeFindOptions,
) -> Result<BatchSizeFind> {
    let step = ModelStep { model, loss: loss_fn };
    find_batch_size_step((vs, &step), loader, optimizer, opts, find)
}

/// [`find_batch_size`] for a step of one's own ([`TrainStep`]).
pub fn find_batch_size_step<D: Dataset + 'static>(
    (vs, step): (&VarStore, &dyn TrainStep),
    loader: &mut DataLoader<D>,
    optimizer: &mut Optimizer,
    opts: EpochOptions,
    find: BatchSizeFindOptions,
) -> Result<BatchSizeFind> {
    let world = opts.strategy.world_size();
    if world > 1 {
        return Err(Error::InvalidArgument(format!(
            "find_batch_size runs on one process, not {world} ranks (a rank out of memory \
             mid-step would leave the others waiting in the all-reduce); run it alone and use \
             its answer as each rank's batch size"
        )));
    }
    let device = opts.device();
    if find.max_memory.is_none() && !device.is_cuda() {
        return Err(Error::InvalidArgument(format!(
            "find_batch_size on {device:?} needs a memory limit (BatchSizeFindOptions::max_memory): \
             off a GPU, running out of memory usually ends the process instead of failing a step"
        )));
    }
    let opts = opts.progress(false);
    let meter = PeakMemory::new(device)?;
    let saved = RestorePoint::take(vs, optimizer)?;
    let (batch_size, limit, epoch) = (loader.batch_size(), loader.batch_limit(), loader.epoch());
    let found = search(&find, loader.dataset().len(), |size| {
        loader.set_batch_size(size);
        loader.set_limit_batches(Some(find.steps_per_trial));
        loader.set_epoch(epoch);
        meter.reset()?;
        let ran = quietly(|| train_epoch_step(step, loader, optimizer, &opts, &mut ()));
        optimizer.zero_grad();
        trial_outcome(size, ran, &meter, find.max_memory)
    });
    loader.set_batch_size(batch_size);
    loader.set_limit_batches(limit);
    loader.set_epoch(epoch);
    // Everything back as it was, whatever happened.
    saved.restore(optimizer)?;
    meter.reset()?;
    found
}

/// A trial's record from how its steps ended: out of memory (an error or a panic) does not fit;
/// any other error ends the search.
fn trial_outcome<T>(
    batch_size: usize,
    ran: std::result::Result<Result<T>, String>,
    meter: &PeakMemory,
    limit: Option<u64>,
) -> Result<BatchSizeTrial> {
    let failure = match ran {
        Ok(Ok(_)) => None,
        Ok(Err(e)) if is_oom_error(&e.to_string()) => Some(e.to_string()),
        Ok(Err(e)) => return Err(e),
        Err(panic) if is_oom_error(&panic) => Some(panic),
        Err(panic) => return Err(Error::Panicked(panic)),
    };
    if let Some(reason) = failure {
        let reason = reason.lines().next().unwrap_or_default().to_string();
        return Ok(BatchSizeTrial {
            batch_size,
            fits: false,
            peak_bytes: None,
            reason: Some(reason),
        });
    }
    let peak = meter.peak()?;
    let over = limit.filter(|&l| peak > l);
    Ok(BatchSizeTrial {
        batch_size,
        fits: over.is_none(),
        peak_bytes: Some(peak),
        reason: over.map(|l| format!("peak {peak} bytes above the limit {l}")),
    })
}

thread_local! {
    /// Set while a trial runs on this thread: its panics are caught and reported as errors.
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f`, a panic in it caught as its message. The panic hook stays silent for panics on
/// this thread meanwhile (an expected out-of-memory panic is not printed); every other thread's
/// panics are printed as before.
fn quietly<T>(f: impl FnOnce() -> T) -> std::result::Result<T, String> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(Cell::get) {
                previous(info)
            }
        }));
    });
    QUIET.with(|q| q.set(true));
    let ran = catch_unwind(AssertUnwindSafe(f)).map_err(panic_message);
    QUIET.with(|q| q.set(false));
    ran
}
