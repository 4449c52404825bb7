//! Callbacks that act on the run: at the end of each epoch's validation a [`Callback`] gets a
//! [`RunControl`] with the model, the optimizer and the epoch's validation, and may stop the
//! run (every rank stops when one asks, as with a pre-emption), set the learning rate, or log
//! values of its own into the epoch's record (Lightning's `trainer.should_stop`,
//! `optimizer.param_groups[i]["lr"] = ...` and `self.log`).
use tch::nn::VarStore;

use super::{Callback, Callbacks};
use crate::dist::Dist;
use crate::train::{EpochSummary, Optimizer};
use crate::{Error, Result};

/// The run in a callback's hands at the end of an epoch's validation
/// ([`Callback::on_validation_end`]).
///
/// ```
/// use trainbook::fit::{Callback, RunControl};
///
/// /// Halves the rate when the validation loss is above 1 after the first epoch; stops at 0.1.
/// struct Steer;
///
/// impl Callback for Steer {
///     fn on_validation_end(&mut self, run: &mut RunControl) -> trainbook::Result<()> {
///         if run.epoch >= 1 && run.val.loss > 1.0 {
///             let lr = run.optimizer.lr();
///             run.set_lr(lr / 2.0);
///         }
///         if run.val.loss < 0.1 {
///             run.stop("the validation loss is below 0.1");
///         }
///         run.log("val_loss_x100", run.val.loss * 100.0);
///         Ok(())
///     }
/// }
/// ```
pub struct RunControl<'a> {
    /// The model's variables (reading them is free; changing them changes the training).
    pub vs: &'a VarStore,
    /// The optimizer (read its rate and state here; set the rate with [`set_lr`](Self::set_lr)).
    pub optimizer: &'a mut Optimizer,
    /// The epoch that just ended (0-based).
    pub epoch: u64,
    /// Optimizer steps of the run so far.
    pub steps_done: u64,
    /// The epoch's validation, over all ranks.
    pub val: &'a EpochSummary,
    stop: Option<String>,
    logged: Vec<(String, f64)>,
}

impl RunControl<'_> {
    /// Ends the run after this epoch (its checkpoint is written first), saying `why`; every
    /// rank stops when one asks. The run's report has it as an early stop.
    pub fn stop(&mut self, why: impl Into<String>) {
        self.stop = Some(why.into());
    }
    /// Sets every param group's learning rate for the next steps (a schedule may change it
    /// again at its next step). Callbacks run on every rank: each must set the same rate
    /// (they see the same all-rank validation); different rates are an error.
    pub fn set_lr(&mut self, lr: f64) {
        self.optimizer.set_lr(lr);
    }
    /// Adds `value` under `name` to the epoch's record: `metrics.jsonl`, TensorBoard (rank 0's
    /// value, as the files are rank 0's) and the epoch line when the name starts with `val_`.
    pub fn log(&mut self, name: impl Into<String>, value: f64) {
        self.logged.push((name.into(), value));
    }
}

/// What the callbacks decided, agreed over the ranks.
pub(crate) struct Acted {
    /// Why the run stops after this epoch (this rank's reason, or that another rank asked).
    pub stop: Option<String>,
    /// The values to add to the epoch's record.
    pub logged: Vec<(String, f64)>,
}

/// Runs every callback's [`Callback::on_validation_end`] and agrees over the ranks: a stop
/// asked on any rank stops all, and the rates the ranks now have must be equal.
pub(crate) fn act(
    dist: &Dist,
    callbacks: &Callbacks,
    (vs, optimizer): (&VarStore, &mut Optimizer),
    (epoch, steps_done): (u64, u64),
    val: &EpochSummary,
) -> Result<Acted> {
    let mut run =
        RunControl { vs, optimizer, epoch, steps_done, val, stop: None, logged: Vec::new() };
    callbacks.each(|c: &mut dyn Callback| c.on_validation_end(&mut run))?;
    let RunControl { stop, logged, optimizer, .. } = run;
    let lr = optimizer.lr();
    let world = dist.world_size();
    // One reduction for both: each rank's stop flag summed, and its rate in its own slot.
    let mut mine = vec![0.0; 1 + world];
    mine[0] = f64::from(u8::from(stop.is_some()));
    mine[1 + dist.rank()] = lr;
    let all = dist.sum_f64(&mine)?;
    if let Some(other) = all[1..].iter().find(|&&r| r.to_bits() != lr.to_bits()) {
        return Err(Error::InvalidArgument(format!(
            "callbacks left different learning rates on the ranks after epoch {} ({lr} here, {other} on another rank): set the same rate on every rank",
            epoch + 1
        )));
    }
    let stop = match stop {
        Some(why) => Some(why),
        None if all[0] > 0.0 => Some("a callback on another rank asked to stop".to_string()),
        None => None,
    };
    Ok(Acted { stop, logged })
}
