//! What an epoch tells its caller as it trains: one [`StepListener`], called before every
//! optimizer step ([`BeforeOptimizerStep`], Lightning's `on_before_optimizer_step`), after it,
//! and whenever step records arrive (Lightning's `on_train_batch_end`, burn's event processor).
//! The loop calls into it one way; the caller's state needs no `RefCell`.
use std::cell::RefCell;

use super::options::StepInfo;
use super::step_record::StepRecord;
use crate::optim::Optimizer;
use crate::train::amp::GradScaler;
use crate::Result;

/// The moment before an optimizer step (Lightning's `on_before_optimizer_step`): the
/// accumulation window's gradients are in (all-reduced, under DDP), not yet clipped nor
/// applied. What is done to the gradients here, the step applies: gradient noise, a gradient
/// penalty of one's own, a look at the gradients' norms.
pub struct BeforeOptimizerStep<'a> {
    optimizer: &'a mut Optimizer,
    scaler: Option<&'a RefCell<GradScaler>>,
}

impl<'a> BeforeOptimizerStep<'a> {
    pub(crate) fn new(
        optimizer: &'a mut Optimizer,
        scaler: Option<&'a RefCell<GradScaler>>,
    ) -> Self {
        BeforeOptimizerStep { optimizer, scaler }
    }

    /// The optimizer about to step, its parameters' gradients true: with a float16 loss scaler,
    /// unscaled first (torch's `scaler.unscale_(optimizer)`, as Lightning does before this
    /// hook; once per step, and the step then does not unscale again). Without a scaler, or
    /// when nothing asks for the optimizer, nothing is unscaled ahead of the step.
    pub fn optimizer(&mut self) -> Result<&mut Optimizer> {
        if let Some(scaler) = self.scaler {
            if !scaler.borrow().is_unscaled() {
                scaler.borrow_mut().unscale_(self.optimizer)?;
            }
        }
        Ok(self.optimizer)
    }
}

/// Receives an epoch's events from [`train_epoch_with`](crate::train::train_epoch_with):
/// [`before_optimizer_step`](Self::before_optimizer_step) before every optimizer step (before
/// clipping), and in this order after it: [`lr_after_step`](Self::lr_after_step), then
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
    /// Before every optimizer step, once the window's gradients are in and before clipping
    /// (see [`BeforeOptimizerStep`]).
    fn before_optimizer_step(&mut self, _step: &mut BeforeOptimizerStep) -> Result<()> {
        Ok(())
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use tch::nn::VarStore;
    use tch::{Device, Kind, Tensor};

    #[test]
    fn the_moment_unscales_once_and_only_when_the_optimizer_is_asked_for() {
        let vs = VarStore::new(Device::Cpu);
        let p = vs.root().ones("w", &[3]);
        let mut opt = Optimizer::sgd(&vs, 0.1, 0.0);
        let scaler = RefCell::new(GradScaler::new(Device::Cpu));
        let backward = || (p.sum(Kind::Float) * 65536.0).backward();

        // Asked for: the gradients come unscaled (the default scale is 2^16), once.
        backward();
        let mut moment = BeforeOptimizerStep::new(&mut opt, Some(&scaler));
        moment.optimizer().unwrap();
        let grad = moment.optimizer().unwrap().parameters()[0].1.grad();
        assert!(grad.equal(&Tensor::ones([3], (Kind::Float, Device::Cpu))), "{grad}");
        assert!(scaler.borrow().is_unscaled());
        drop(scaler.borrow_mut().step(&mut opt).unwrap());
        assert!(!scaler.borrow().is_unscaled(), "the step used the unscaled gradients");

        // Not asked for: nothing is unscaled ahead of the step.
        opt.zero_grad();
        backward();
        let _moment = BeforeOptimizerStep::new(&mut opt, Some(&scaler));
        assert!(!scaler.borrow().is_unscaled());
    }
}
