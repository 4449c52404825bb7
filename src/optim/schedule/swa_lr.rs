//! [`SWALR`]: torch's `swa_utils.SWALR`, the rate annealed to a fixed SWA rate, per epoch.
use serde::{Deserialize, Serialize};

use super::{check, from_state, state_methods, to_state, Anneal, Cadence, LrSchedule, Validation};
use crate::Result;

/// `torch.optim.swa_utils.SWALR`: from the optimizer's rate to `swa_lr` over `anneal_epochs`
/// steps along half a cosine (`Anneal::Cos`, torch's default) or a line, then `swa_lr`. Its
/// chainable form, as torch's `get_lr`: each step recovers the rate before annealing from the
/// current one and the previous step's share, then mixes in `swa_lr` by this step's share
/// (`tests/training/schedules.rs` checks it against torch's, value for value).
///
/// ```
/// use trainbook::train::{Anneal, LrSchedule, SWALR};
/// # fn main() -> trainbook::Result<()> {
/// // torch: SWALR(SGD(params, lr=0.1), swa_lr=0.05, anneal_epochs=2, anneal_strategy="linear")
/// let mut sched = SWALR::new(0.05, 2, Anneal::Linear);
/// let mut lrs = vec![sched.start(0.1)?];
/// for _ in 0..3 {
///     let lr = sched.advance(*lrs.last().unwrap(), None)?;
///     lrs.push(lr);
/// }
/// assert_eq!(lrs[0], 0.1);
/// assert!((lrs[1] - 0.075).abs() < 1e-15);
/// assert_eq!(&lrs[2..], [0.05, 0.05]);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SWALR {
    /// The rate annealed to (at least 0).
    pub swa_lr: f64,
    /// Steps of the annealing (torch's default 10; 0: `swa_lr` from the start).
    pub anneal_epochs: u64,
    /// Half a cosine (the default) or a line.
    pub anneal: Anneal,
    /// Per epoch (the default, as torch's examples step it) or per optimizer step.
    #[serde(default)]
    pub cadence: Cadence,
    last_epoch: u64,
}

impl SWALR {
    /// `SWALR(optimizer, swa_lr, anneal_epochs, anneal_strategy)`, stepped per epoch.
    pub fn new(swa_lr: f64, anneal_epochs: u64, anneal: Anneal) -> Self {
        SWALR { swa_lr, anneal_epochs, anneal, cadence: Cadence::Epoch, last_epoch: 0 }
    }
    /// Steps per epoch ([`Cadence::Epoch`], the default) or per optimizer step.
    pub fn stepping(mut self, cadence: Cadence) -> Self {
        self.cadence = cadence;
        self
    }
    /// The share of `swa_lr` at fraction `t` of the annealing.
    fn share(&self, t: f64) -> f64 {
        match self.anneal {
            Anneal::Cos => (1.0 - (std::f64::consts::PI * t).cos()) / 2.0,
            Anneal::Linear => t,
        }
    }
    /// torch's `get_lr` after `last_epoch` steps, from the current rate `lr`.
    fn lr_at(&self, lr: f64) -> f64 {
        let step = match self.anneal_epochs {
            0 => self.last_epoch.max(1),
            _ => self.last_epoch,
        } as f64;
        let span = self.anneal_epochs.max(1) as f64;
        let prev_share = self.share(((step - 1.0) / span).clamp(0.0, 1.0));
        let before = if prev_share == 1.0 {
            self.swa_lr
        } else {
            (lr - prev_share * self.swa_lr) / (1.0 - prev_share)
        };
        let share = self.share((step / span).clamp(0.0, 1.0));
        self.swa_lr * share + before * (1.0 - share)
    }
}

impl LrSchedule for SWALR {
    fn name(&self) -> &'static str {
        "SWALR"
    }
    fn cadence(&self) -> Cadence {
        self.cadence
    }
    fn validate(&self) -> Result<()> {
        let ok = self.swa_lr >= 0.0 && self.swa_lr.is_finite();
        check(ok, self.name(), "swa_lr", "finite and >= 0", self.swa_lr)
    }
    /// torch's constructor steps once: the rate itself, or `swa_lr` with `anneal_epochs` 0.
    fn start(&mut self, lr: f64) -> Result<f64> {
        self.validate()?;
        self.last_epoch = 0;
        Ok(self.lr_at(lr))
    }
    fn advance(&mut self, lr: f64, _validation: Option<Validation>) -> Result<f64> {
        self.validate()?;
        self.last_epoch += 1;
        Ok(self.lr_at(lr))
    }
    state_methods!();
}
