//! How long a run is, where it writes, which checkpoints it keeps, and whether it resumes: the
//! [`Trainer`] settings behind `FitConfig`'s `epochs`, `out`, `policy` and `resume`.
use std::path::PathBuf;

use super::Trainer;
use crate::checkpoint::Policy;
use crate::train::Mode;

/// How long the run is, where it writes, what it keeps, and whether it resumes.
impl Trainer<'_> {
    /// Epochs to train in all (a resumed run trains only the missing ones). Default 1.
    pub fn epochs(mut self, epochs: u64) -> Self {
        self.cfg.epochs = epochs;
        self
    }

    /// Output folder (rank 0 writes its files there, checkpoints under `checkpoints/`).
    /// Default `runs/fit`.
    pub fn out(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cfg.out = dir.into();
        self
    }

    /// All checkpoint settings at once.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.cfg.policy = policy;
        self
    }

    /// A checkpoint at the end of every `n`-th epoch (0: none at epoch ends). Default 1.
    pub fn checkpoint_every_epochs(mut self, n: u64) -> Self {
        self.cfg.policy.every_epochs = (n > 0).then_some(n);
        self
    }

    /// Also a checkpoint every `n` optimizer steps, mid-epoch too (0: none). Default none.
    pub fn checkpoint_every_steps(mut self, n: u64) -> Self {
        self.cfg.policy.every_steps = (n > 0).then_some(n);
        self
    }

    /// How many step checkpoints to keep (older ones are deleted). Default 2.
    pub fn keep_last(mut self, n: usize) -> Self {
        self.cfg.policy.keep_last = n;
        self
    }

    /// Keep `best/` by the highest validation accuracy (`Some(Mode::Max)`, the default), by the
    /// lowest validation loss (`Some(Mode::Min)`), or not at all (`None`).
    pub fn keep_best(mut self, mode: Option<Mode>) -> Self {
        self.cfg.policy.best = mode;
        self
    }

    /// Continue from the newest intact checkpoint in `out/checkpoints` (default `true`).
    pub fn resume(mut self, resume: bool) -> Self {
        self.cfg.resume = resume;
        self
    }
}
