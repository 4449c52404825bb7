//! Checkpoints that survive a crashed worker: safetensors tensors (model with PyTorch names,
//! optimizer state) plus a JSON manifest (position in training, every rank's RNG state,
//! best metric, config, file checksums) and the run's other parts by key ([`crate::Stateful`]:
//! the schedule, the loss scaler, early stopping, the EMA, a part of the user's own), written atomically by rank 0 while
//! the other ranks wait, or (with [`Checkpointer::background`]) snapshotted to host memory and
//! written by a background thread while training goes on (torch's `async_save`); `latest` skips
//! damaged checkpoints and says why; `restore` puts model, optimizer, RNG and data position back
//! so training continues on the identical trajectory.
mod manifest;
mod parts;
mod snapshot;
mod state;
mod store;

use std::path::{Path, PathBuf};

use tch::nn::VarStore;
use tch::Tensor;

pub use manifest::{
    upgrade_from_v1, FileEntry, Manifest, PartEntry, EMA_FILE, FORMAT_VERSION, MANIFEST,
    MODEL_FILE, OPTIMIZER_FILE,
};
pub use parts::restore_parts;
pub use state::{Policy, ResumePoint, TrainState};
pub use store::{
    open_checkpoint, read_tensors_file, scan, write_checkpoint, Checkpoint, FileWriter, ScanReport,
};

use crate::dist::Dist;
use crate::models::{from_safetensors_bytes, load_state_dict, save_tensors_file, state_dict};
use crate::train::{Mode, Optimizer, RunningMetrics};
use crate::{Error, Result, WithPath};

/// Writes checkpoints per a [`Policy`] and finds the newest intact one to resume from. Every
/// rank creates one with the same root and calls the same methods (saving is collective:
/// each rank contributes its RNG state; rank 0 writes). Layout under the root:
/// `step-<global step, 9 digits>/` and `best/`, each holding `manifest.json`,
/// `model.safetensors` and `optimizer.safetensors`.
///
/// # Example
///
/// ```no_run
/// # fn main() -> trainbook::Result<()> {
/// use tch::nn::VarStore;
/// use trainbook::checkpoint::{Checkpointer, Policy, TrainState};
/// use trainbook::dist::Dist;
/// use trainbook::models::MnistNet;
/// use trainbook::train::Optimizer;
/// let dist = Dist::init()?;
/// let mut vs = VarStore::new(dist.device());
/// let _net = MnistNet::new(&vs.root());
/// let mut opt = Optimizer::sgd(&vs, 0.01, 0.9);
/// let mut ckpt = Checkpointer::new("checkpoints", Policy::default());
/// let mut first_epoch = 0;
/// if let Some(found) = ckpt.latest(&dist)? {
///     first_epoch = ckpt.restore(&found, &dist, &mut vs, &mut opt)?.epoch;
/// }
/// for epoch in first_epoch..10 {
///     // ... train the epoch, calling `ckpt.after_step` after each optimizer step ...
///     let val_accuracy = 0.9;
///     ckpt.after_epoch(&dist, &TrainState::new(&vs, &opt, epoch + 1), epoch, Some(val_accuracy))?;
/// }
/// # Ok(()) }
/// ```
pub struct Checkpointer {
    root: PathBuf,
    policy: Policy,
    best: Option<f64>,
    global_step: u64,
    /// The step whose `step-*` was written last (so an interrupt does not write it twice).
    last_saved_step: Option<u64>,
    background: bool,
    in_flight: Option<std::thread::JoinHandle<Result<PathBuf>>>,
}

const STEP_PREFIX: &str = "step-";
/// Name of the directory under the root that holds the best checkpoint so far.
pub const BEST_DIR: &str = "best";

impl Checkpointer {
    /// A checkpointer writing under `root` (created at the first save) per `policy`, with
    /// foreground writes. Nothing is read until [`latest`](Self::latest).
    pub fn new(root: impl AsRef<Path>, policy: Policy) -> Checkpointer {
        Checkpointer {
            root: root.as_ref().to_path_buf(),
            policy,
            best: None,
            global_step: 0,
            last_saved_step: None,
            background: false,
            in_flight: None,
        }
    }

    /// Writes in the background: a save copies the state to host memory and returns; a thread
    /// writes the files (atomically, as always) while training continues. At most one write is
    /// in flight (the next save waits for it); a failed write is reported by the next save or
    /// by [`wait`](Self::wait) on every rank; dropping the checkpointer waits for the last one.
    pub fn background(mut self, on: bool) -> Self {
        self.background = on;
        self
    }

    /// Waits for the background write in flight, if any; returns its directory or its error.
    pub fn wait(&mut self) -> Result<Option<PathBuf>> {
        match self.in_flight.take() {
            None => Ok(None),
            Some(handle) => handle
                .join()
                .map_err(|_| Error::Checkpoint("the checkpoint writer thread panicked".into()))?
                .map(Some),
        }
    }

    /// The directory holding the checkpoints.
    pub fn root(&self) -> &Path {
        &self.root
    }
    /// Optimizer steps counted by [`after_step`](Self::after_step) (restored by `restore`);
    /// it names the `step-*` directories.
    pub fn global_step(&self) -> u64 {
        self.global_step
    }
    /// Best monitored value seen by [`after_epoch`](Self::after_epoch) (or restored); `None`
    /// before the first.
    pub fn best_metric(&self) -> Option<f64> {
        self.best
    }
    /// The newest `step-*` directory this checkpointer wrote (the write may still be in flight
    /// in the background); `None` before its first.
    pub fn last_saved(&self) -> Option<PathBuf> {
        self.last_saved_step.map(|step| self.root.join(format!("{STEP_PREFIX}{step:09}")))
    }
    /// The `best/` directory, once a best checkpoint was written (or restored).
    pub fn best_dir(&self) -> Option<PathBuf> {
        self.best.map(|_| self.root.join(BEST_DIR))
    }

    /// The newest intact `step-*` checkpoint (highest global step); damaged ones are reported on
    /// stderr by rank 0 (file and reason) and skipped. `None` (rank 0 says so on stdout) when
    /// there is nothing to resume from, a missing root included. Errors: [`Error::Io`] when the root
    /// cannot be listed.
    pub fn latest(&self, dist: &Dist) -> Result<Option<Checkpoint>> {
        let report = scan(&self.root, STEP_PREFIX)?;
        if dist.is_main() {
            for (dir, why) in &report.invalid {
                eprintln!("checkpoint: skipping {}: {why}", dir.display());
            }
            if report.valid.is_empty() {
                // News, not a warning: stdout (a notebook shows stderr in red).
                println!(
                    "checkpoint: no valid checkpoint in {}; starting fresh",
                    self.root.display()
                );
            }
        }
        Ok(report.valid.into_iter().next())
    }

    /// Restores model, optimizer and this rank's RNG (CPU, and CUDA on a GPU) from `ckpt`, and
    /// this checkpointer's step count and best metric; returns where to continue. With another
    /// world size than the checkpoint's, the RNG states are not restored (a note is printed; a
    /// loop of one's own then chooses its batches: `fit` keeps the global batch).
    /// Errors: [`Error::Io`] for unreadable files, [`Error::Checkpoint`] when the model's
    /// names or shapes differ from the checkpoint's, [`Error::InvalidArgument`] when the
    /// optimizer's kind or parameters differ.
    pub fn restore(
        &mut self,
        ckpt: &Checkpoint,
        dist: &Dist,
        vs: &mut VarStore,
        optimizer: &mut Optimizer,
    ) -> Result<ResumePoint> {
        let m = &ckpt.manifest;
        let read = |file: &str| -> Result<Vec<(String, Tensor)>> {
            let path = ckpt.dir.join(file);
            let bytes = store::map_file(&path).with_path(&path)?;
            from_safetensors_bytes(&bytes, &path)
        };
        load_state_dict(vs, &read(MODEL_FILE)?, true)
            .map_err(|e| Error::Checkpoint(format!("checkpoint {}: {e}", ckpt.dir.display())))?;
        optimizer.load_state_dict_owned(read(OPTIMIZER_FILE)?, &m.optimizer)?;
        if m.world_size == dist.world_size() {
            snapshot::restore_rng_states(m, dist, &ckpt.dir)?;
        } else {
            dist.println(format!("checkpoint: saved with {} ranks, resuming with {}: the ranks' RNG states are not restored", m.world_size, dist.world_size()));
        }
        self.best = m.best_metric;
        self.global_step = m.global_step;
        // The partial epoch's metrics are global sums: rank 0 carries them, the others start at 0.
        let epoch_metrics =
            if dist.is_main() { m.epoch_metrics.clone() } else { RunningMetrics::default() };
        Ok(ResumePoint {
            epoch: m.epoch,
            batches_done: m.batches_done,
            global_step: m.global_step,
            epoch_metrics,
            best_metric: m.best_metric,
            dir: ckpt.dir.clone(),
        })
    }

    /// Call after every optimizer step; writes `step-*` when `every_steps` says so. `state` is
    /// only built for a step that saves (building it reads the running metrics from the device,
    /// and the parts' states); its error ends the call.
    pub fn after_step<'s>(
        &mut self,
        dist: &Dist,
        state: impl FnOnce() -> Result<TrainState<'s>>,
    ) -> Result<Option<PathBuf>> {
        self.global_step += 1;
        match self.policy.every_steps {
            Some(n) if n > 0 && self.global_step % n == 0 => {
                self.save_step(dist, &state()?).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// Counts `n` optimizer steps taken without [`after_step`](Self::after_step): a loop that
    /// trains whole epochs with [`train_epoch`](crate::train::train_epoch) and checkpoints only
    /// at their ends passes each epoch's [`EpochSummary::steps`](crate::train::EpochSummary::steps)
    /// before [`after_epoch`](Self::after_epoch), so that every `step-*` folder is named after
    /// the steps taken (otherwise each epoch's checkpoint would be `step-000000000`, written over
    /// the one before).
    ///
    /// ```
    /// # use trainbook::checkpoint::{Checkpointer, Policy};
    /// let mut ckpt = Checkpointer::new("runs/doc/checkpoints", Policy::default());
    /// ckpt.add_steps(29); // an epoch of 29 optimizer steps
    /// assert_eq!(ckpt.global_step(), 29);
    /// ```
    pub fn add_steps(&mut self, n: u64) {
        self.global_step += n;
    }

    /// Call at the end of an epoch (`state.epoch` = the next epoch, `batches_done` = 0) with
    /// the monitored metric; writes `step-*` per `every_epochs` and `best/` when it improved.
    pub fn after_epoch(
        &mut self,
        dist: &Dist,
        state: &TrainState,
        finished_epoch: u64,
        metric: Option<f64>,
    ) -> Result<()> {
        let improved = match (self.policy.best, metric, self.best) {
            (Some(_), Some(_), None) => true,
            (Some(Mode::Max), Some(v), Some(b)) => v > b,
            (Some(Mode::Min), Some(v), Some(b)) => v < b,
            _ => false,
        };
        if improved {
            self.best = metric;
            self.save(dist, state, BEST_DIR, false)?;
        }
        if self.policy.every_epochs.is_some_and(|n| n > 0 && (finished_epoch + 1) % n == 0) {
            self.save_step(dist, state)?;
        }
        Ok(())
    }

    fn save_step(&mut self, dist: &Dist, state: &TrainState) -> Result<PathBuf> {
        let name = format!("{STEP_PREFIX}{:09}", self.global_step);
        self.last_saved_step = Some(self.global_step);
        self.save(dist, state, &name, true)
    }

    /// Writes `step-*` for the current step now, whatever the policy (a run that is being
    /// interrupted); nothing new if `after_step` has just written this step.
    pub fn save_now<'s>(
        &mut self,
        dist: &Dist,
        state: impl FnOnce() -> Result<TrainState<'s>>,
    ) -> Result<PathBuf> {
        if self.last_saved_step == Some(self.global_step) {
            return Ok(self.root.join(format!("{STEP_PREFIX}{:09}", self.global_step)));
        }
        self.save_step(dist, &state()?)
    }

    /// Writes one checkpoint: every rank contributes its RNG state, rank 0 writes (then prunes
    /// old `step-*` when `prune` is set); all wait, unless the write goes to the background.
    fn save(
        &mut self,
        dist: &Dist,
        state: &TrainState,
        name: &str,
        prune: bool,
    ) -> Result<PathBuf> {
        let _range = crate::train::phase_range(crate::train::phase::CHECKPOINT_COPY);
        if self.background {
            // The previous background write must have succeeded, and every rank learns if not.
            let previous = self.wait();
            let failed = dist.sum_f64(&[previous.is_err() as u8 as f64])?[0] > 0.0;
            if failed {
                return Err(previous.err().unwrap_or_else(|| {
                    Error::Checkpoint("rank 0 could not write the previous checkpoint".into())
                }));
            }
        }
        let global_metrics = state.epoch_metrics.clone().sum_over(dist)?;
        let (states, device_states) = snapshot::gather_rng_states(dist)?;
        let dir = self.root.join(name);
        if !dist.is_main() {
            if !self.background {
                dist.barrier()?;
            }
            return Ok(dir);
        }
        let (opt_tensors, opt_meta) = state.optimizer.state_dict();
        let manifest = Manifest {
            format_version: FORMAT_VERSION,
            epoch: state.epoch,
            batches_done: state.batches_done,
            global_step: self.global_step,
            epoch_metrics: global_metrics,
            world_size: dist.world_size(),
            seed: state.seed,
            rng_states: states,
            device_rng_states: device_states,
            best_metric: self.best,
            optimizer: opt_meta,
            config: state.config.clone(),
            parts: Default::default(),
            files: Default::default(),
        };
        let (manifest, part_files) = parts::snapshot(manifest, &state.parts);
        // A snapshot on the host: the background thread must not see later updates. The
        // optimizer's export is already a copy; on the CPU only the model needs one.
        let (model, opt_tensors) =
            (snapshot::on_host(state_dict(state.vs), true), snapshot::on_host(opt_tensors, false));
        let (root, name, keep_last) = (self.root.clone(), name.to_string(), self.policy.keep_last);
        let write = move || -> Result<PathBuf> {
            let mut files: Vec<(&str, store::FileWriter)> = vec![
                (MODEL_FILE, Box::new(|p: &Path| save_tensors_file(&model, p))),
                (OPTIMIZER_FILE, Box::new(|p: &Path| save_tensors_file(&opt_tensors, p))),
            ];
            for (file, tensors) in &part_files {
                files.push((file, Box::new(|p: &Path| save_tensors_file(tensors, p))));
            }
            let dir = root.join(&name);
            write_checkpoint(&root, &name, manifest, files).map_err(|e| {
                Error::Checkpoint(format!(
                    "could not write checkpoint {} (the previous ones are untouched): {e}",
                    dir.display()
                ))
            })?;
            if prune {
                store::prune_steps(&root, STEP_PREFIX, keep_last)?;
            }
            Ok(dir)
        };
        if self.background {
            self.in_flight = Some(
                std::thread::Builder::new()
                    .name("checkpoint-writer".into())
                    .spawn(write)
                    .with_path(&self.root)?,
            );
            return Ok(dir);
        }
        let written = write();
        // Everybody waits, so nobody goes on (or resumes) before the checkpoint is complete;
        // a failed write is reported by rank 0 after the barrier.
        dist.barrier()?;
        written
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        // The run does not end with a write half done; an error here has nowhere else to go.
        if let Err(e) = self.wait() {
            eprintln!("checkpoint: {e}");
        }
    }
}
