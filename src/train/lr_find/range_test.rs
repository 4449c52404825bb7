//! The range test's loop: epochs of [`train_epoch_with`] with a listener that sets each step's
//! rate, smooths the step losses as they are read (one read per step: the test needs each loss
//! to decide whether to go on) and ends the epoch once the test is done; then everything it
//! changed is put back.
use tch::nn::{ModuleT, VarStore};

use super::{valley, LrFind, LrFindOptions, Smoother};
use crate::data::{DataLoader, Dataset};
use crate::train::restore_point::RestorePoint;
use crate::train::{
    train_epoch_step, EpochOptions, Loss, ModelStep, Optimizer, StepInfo, StepListener,
    StepLogging, StepRecord, Strategy, TrainStep,
};
use crate::{Error, Result};

/// Sets the rates and records the curve.
struct RangeTest<'a> {
    find: LrFindOptions,
    strategy: &'a dyn Strategy,
    smoother: Smoother,
    best: f64,
    curve: LrFind,
    /// Optimizer steps taken.
    steps: usize,
    done: bool,
}

impl StepListener for RangeTest<'_> {
    fn lr_after_step(&mut self, optimizer: &mut Optimizer) -> Result<()> {
        self.steps += 1;
        optimizer.set_lr(self.find.lr_at(self.steps));
        Ok(())
    }
    fn on_step(&mut self, info: &StepInfo) -> Result<()> {
        // Reading the sums brings this step's record, handed over right after.
        let _ = info.metrics();
        Ok(())
    }
    fn on_steps_read(&mut self, steps: &[StepRecord]) -> Result<()> {
        for s in steps {
            let losses = self.strategy.gather_f64(s.loss)?;
            let loss = losses.iter().sum::<f64>() / losses.len() as f64;
            let smooth = self.smoother.add(loss);
            self.curve.lrs.push(s.lr);
            self.curve.raw_losses.push(loss);
            self.curve.losses.push(smooth);
            if smooth < self.best {
                self.best = smooth;
            }
            let diverged = self.find.stop_div && smooth > 4.0 * self.best;
            if diverged || self.curve.lrs.len() >= self.find.num_it() {
                self.done = true;
                return Err(Error::Interrupted("lr_find: the range test is done".into()));
            }
        }
        Ok(())
    }
}

/// Runs the range test on `model` (its variables in `vs`) over `loader` with `optimizer`,
/// minimising `loss_fn` under `opts` (device, strategy, precision as for training; step
/// records are turned on, progress off), as many epochs as it takes; then puts the weights,
/// the optimizer's state and rate, and the CPU random generator back as they were. Errors:
/// [`Error::InvalidArgument`] for bad options or a loader without batches; a training error
/// after the state is put back.
pub fn lr_find<D: Dataset + 'static>(
    (vs, model): (&VarStore, &dyn ModuleT),
    loader: &mut DataLoader<D>,
    optimizer: &mut Optimizer,
    loss_fn: &dyn Loss,
    opts: EpochOptions,
    find: LrFindOptions,
) -> Result<LrFind> {
    let step = ModelStep { model, loss: loss_fn };
    lr_find_step((vs, &step), loader, optimizer, opts, find)
}

/// [`lr_find`] for a step of one's own ([`TrainStep`]): its training forward pass and loss on
/// every step of the test, everything else as for a model and a loss.
pub fn lr_find_step<D: Dataset + 'static>(
    (vs, step): (&VarStore, &dyn TrainStep),
    loader: &mut DataLoader<D>,
    optimizer: &mut Optimizer,
    opts: EpochOptions,
    find: LrFindOptions,
) -> Result<LrFind> {
    find.validate()?;
    let saved = RestorePoint::take(vs, optimizer)?;
    let opts = opts.progress(false).step_records(StepLogging { epoch: 0, steps_before: 0 });
    let strategy = opts.strategy;
    let mut test = RangeTest {
        find,
        strategy,
        smoother: Smoother::new(),
        best: f64::INFINITY,
        curve: LrFind { lrs: vec![], raw_losses: vec![], losses: vec![], suggestion: None },
        steps: 0,
        done: false,
    };
    optimizer.set_lr(find.lr_at(0));
    let mut outcome = Ok(());
    for epoch in 0.. {
        loader.set_epoch(epoch);
        let before = test.steps;
        match train_epoch_step(step, loader, optimizer, &opts, &mut test) {
            Err(Error::Interrupted(_)) if test.done => break,
            Err(e) => outcome = Err(e),
            Ok(_) if test.steps == before => {
                outcome = Err(Error::InvalidArgument("lr_find: the loader has no batches".into()))
            }
            Ok(_) => continue,
        }
        break;
    }
    // Everything back as it was, whatever happened.
    saved.restore(optimizer)?;
    outcome?;
    let mut curve = test.curve;
    let (lrs, losses) = curve.considered(find.num_it());
    curve.suggestion = valley(losses).map(|i| (lrs[i], losses[i]));
    Ok(curve)
}
