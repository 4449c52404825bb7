//! What an epoch tells its caller as it trains: one [`StepListener`], called after every
//! optimizer step and whenever step records arrive (Lightning's `on_train_batch_end`, burn's
//! event processor). The loop calls into it one way; the caller's state needs no `RefCell`.
use super::options::StepInfo;
use super::step_record::StepRecord;
use crate::optim::Optimizer;
use crate::Result;

/// Receives an epoch's events from [`train_epoch_with`](crate::train::train_epoch_with), in this order
/// after every optimizer step: [`lr_after_step`](Self::lr_after_step), then
/// [`on_step`](Self::on_step); and [`on_steps_read`](Self::on_steps_read) whenever step
/// records were read from the device (with
/// [`EpochOptions::step_records`](crate::train::EpochOptions::step_records)). Every method has a
/// default that does nothing; an error ends the epoch with that error. `()` is the listener
/// that does nothing ([`train_epoch`](crate::train::train_epoch) uses it).
///
/// ```
/// use trainbook::train::{StepInfo, StepListener};
///
/// /// Counts the optimizer steps of an epoch.
/// #[derive(Default)]
/// struct Steps(usize);
///
/// impl StepListener for Steps {
///     fn on_step(&mut self, _info: &StepInfo) -> trainbook::Result<()> {
///         self.0 += 1;
///         Ok(())
///     }
/// }
/// ```
pub trait StepListener {
    /// After every optimizer step, first: set the next step's learning rates (a per-step
    /// [`LrSchedule`](crate::train::LrSchedule)'s `advance` for each param group, then
    /// [`Optimizer::set_group_lrs`]), so that a checkpoint written in `on_step` holds them.
    fn lr_after_step(&mut self, _optimizer: &mut Optimizer) -> Result<()> {
        Ok(())
    }
    /// After every optimizer step, second: a step checkpoint, a stop request.
    fn on_step(&mut self, _info: &StepInfo) -> Result<()> {
        Ok(())
    }
    /// Step records read from the device together with the running sums (when progress is
    /// printed, when `on_step` reads the metrics, at the epoch's end): in bursts, in step order.
    fn on_steps_read(&mut self, _steps: &[StepRecord]) -> Result<()> {
        Ok(())
    }
}

/// The listener that does nothing.
impl StepListener for () {}
