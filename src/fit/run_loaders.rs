//! What a run sets on the caller's loaders for itself and puts back after: the batch limits
//! (`limit_train_batches`, `limit_val_batches`) and the training batches' mixing
//! (`mixup_cutmix`).
use crate::data::{DataLoader, Dataset};
use crate::fit::config::FitConfig;
use crate::transforms::MixUpCutMix;
use crate::Result;

/// The loaders' own settings, as they were before the run.
pub(crate) struct LoaderSettings {
    limits: (Option<usize>, Option<usize>),
    mix: Option<MixUpCutMix>,
}

impl LoaderSettings {
    /// Sets what `cfg` asks for on `train` and `val` and returns what they had; an error (a bad
    /// alpha) leaves them as they were.
    pub fn apply<A: Dataset + 'static, B: Dataset + 'static>(
        cfg: &FitConfig,
        train: &mut DataLoader<A>,
        val: &mut DataLoader<B>,
    ) -> Result<LoaderSettings> {
        let classes = train.dataset().classes().len();
        let mix = cfg.mixup_cutmix.map(|(a, b)| MixUpCutMix::new(a, b, classes)).transpose()?;
        let before = LoaderSettings {
            limits: (train.batch_limit(), val.batch_limit()),
            mix: train.batch_mixing().cloned(),
        };
        if mix.is_some() {
            train.set_batch_mix(mix);
        }
        train.set_limit_batches(cfg.limit_train_batches.or(before.limits.0));
        val.set_limit_batches(cfg.limit_val_batches.or(before.limits.1));
        Ok(before)
    }

    /// Puts the loaders' own settings back.
    pub fn restore<A: Dataset + 'static, B: Dataset + 'static>(
        self,
        train: &mut DataLoader<A>,
        val: &mut DataLoader<B>,
    ) {
        train.set_batch_mix(self.mix);
        train.set_limit_batches(self.limits.0);
        val.set_limit_batches(self.limits.1);
    }
}
