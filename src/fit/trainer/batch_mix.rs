//! [`Trainer`]'s batch mixing: MixUp and CutMix on the training batches for the run, as
//! torchvision's classification recipe applies them (`--mixup-alpha`, `--cutmix-alpha`).
use super::Trainer;

/// MixUp and CutMix over the run's training batches.
impl Trainer<'_> {
    /// Mixes every training batch by MixUp (weight from Beta(`mixup_alpha`, `mixup_alpha`)) or
    /// CutMix (Beta(`cutmix_alpha`, `cutmix_alpha`)), one of the two chosen with equal chance
    /// when both alphas are above 0, an alpha of 0 leaving that one out: torchvision's reference
    /// (`--mixup-alpha 0.2 --cutmix-alpha 1.0` in its recent recipes). The batch's labels become
    /// class probabilities for the loss (cross-entropy takes them as torch's does); the training
    /// accuracy counts the most probable class, as the reference does; validation is not mixed.
    /// The train loader keeps its own setting after the run
    /// ([`DataLoader::batch_mix`](crate::data::DataLoader::batch_mix)). Both 0, or a negative
    /// alpha, is an error of `fit`.
    ///
    /// ```
    /// use trainbook::{dist::Dist, fit::Trainer};
    /// let dist = Dist::single(tch::Device::Cpu);
    /// let trainer = Trainer::new(&dist).mixup_cutmix(0.2, 1.0);
    /// assert_eq!(trainer.config().mixup_cutmix, Some((0.2, 1.0)));
    /// ```
    pub fn mixup_cutmix(mut self, mixup_alpha: f64, cutmix_alpha: f64) -> Self {
        self.cfg.mixup_cutmix = Some((mixup_alpha, cutmix_alpha));
        self
    }
}
