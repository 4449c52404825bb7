//! Schedules of a function of the step: [`LambdaLR`] (the base rate times `f(step)`) and
//! [`MultiplicativeLR`] (the rate times `f(step)` at every step), as torch's. The function is
//! code, so a checkpoint keeps only the progress and the base rate: a resumed run builds the
//! schedule with the same function again (as torch's `state_dict` leaves lambdas out).
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{check, Cadence, LrSchedule, Validation};
use crate::{Error, Result};

/// The step's factor.
pub type LrLambda = Arc<dyn Fn(u64) -> f64 + Send + Sync>;

/// The saved part of a lambda schedule.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LambdaState {
    kind: String,
    base_lr: f64,
    cadence: Cadence,
    last_epoch: u64,
}

macro_rules! lambda_schedule {
    ($name:ident, $torch:literal, $doc:literal) => {
        #[doc = $doc]
        #[derive(Clone)]
        pub struct $name {
            f: LrLambda,
            /// The optimizer's rate when the schedule started (torch's `base_lrs`).
            pub base_lr: f64,
            /// Per epoch (the default) or per optimizer step.
            pub cadence: Cadence,
            last_epoch: u64,
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct($torch)
                    .field("base_lr", &self.base_lr)
                    .field("cadence", &self.cadence)
                    .field("last_epoch", &self.last_epoch)
                    .finish_non_exhaustive()
            }
        }

        impl $name {
            #[doc = concat!("`", $torch, "(optimizer, lr_lambda=f)`, stepped per epoch.")]
            pub fn new(f: impl Fn(u64) -> f64 + Send + Sync + 'static) -> Self {
                $name { f: Arc::new(f), base_lr: 0.0, cadence: Cadence::Epoch, last_epoch: 0 }
            }
            /// Steps per epoch ([`Cadence::Epoch`], the default) or per optimizer step.
            pub fn stepping(mut self, cadence: Cadence) -> Self {
                self.cadence = cadence;
                self
            }
            fn factor(&self) -> Result<f64> {
                let x = (self.f)(self.last_epoch);
                check(x.is_finite(), $torch, "lr_lambda", "finite", x).map(|_| x)
            }
        }

        impl LrSchedule for $name {
            fn name(&self) -> &'static str {
                $torch
            }
            fn cadence(&self) -> Cadence {
                self.cadence
            }
            /// The base rate, and the function's value at the current step: finite.
            fn validate(&self) -> Result<()> {
                check(self.base_lr.is_finite(), $torch, "base_lr", "finite", self.base_lr)?;
                self.factor().map(|_| ())
            }
            fn start(&mut self, lr: f64) -> Result<f64> {
                self.base_lr = lr;
                self.last_epoch = 0;
                self.validate()?;
                self.first(lr)
            }
            fn start_chained(&mut self, lr: f64, initial_lr: f64) -> Result<f64> {
                let base = self.chained_base(lr, initial_lr);
                self.start(base)
            }
            fn advance(&mut self, lr: f64, _validation: Option<Validation>) -> Result<f64> {
                self.last_epoch += 1;
                self.next(lr)
            }
            /// torch's `step(0)`: step 0 again, from the rate the previous schedule left.
            fn restart_from(&mut self, lr: f64, initial_lr: f64) -> Result<f64> {
                self.start(initial_lr)?;
                self.next(lr)
            }
            fn steps(&self) -> u64 {
                self.last_epoch
            }
            fn state(&self) -> serde_json::Value {
                let s = LambdaState {
                    kind: $torch.into(),
                    base_lr: self.base_lr,
                    cadence: self.cadence,
                    last_epoch: self.last_epoch,
                };
                serde_json::to_value(s).unwrap_or(serde_json::Value::Null)
            }
            /// Restores the progress and base rate; the function stays the one this schedule
            /// was built with.
            fn load_state(&mut self, state: &serde_json::Value) -> Result<()> {
                let s: LambdaState = serde_json::from_value(state.clone())
                    .ok()
                    .filter(|s: &LambdaState| s.kind == $torch)
                    .ok_or_else(|| Error::Checkpoint(format!("{} state {state}", $torch)))?;
                (self.base_lr, self.cadence, self.last_epoch) =
                    (s.base_lr, s.cadence, s.last_epoch);
                self.validate()
            }
            fn box_clone(&self) -> Box<dyn LrSchedule> {
                Box::new(self.clone())
            }
        }
    };
}

lambda_schedule!(
    LambdaLR,
    "LambdaLR",
    "`torch.optim.lr_scheduler.LambdaLR`: the rate is the base rate times `f(step)` (step 0 at \
     the start). Not chainable: it sets the rate from the base rate whatever came before.\n\n\
     ```\nuse trainbook::train::{LambdaLR, LrSchedule};\n# fn main() -> trainbook::Result<()> {\n\
     // A linear warmup over 4 epochs: torch's LambdaLR(opt, lambda e: min(1.0, (e + 1) / 4))\n\
     let mut sched = LambdaLR::new(|e| ((e + 1) as f64 / 4.0).min(1.0));\n\
     assert_eq!(sched.start(0.1)?, 0.1 * 0.25);\n# Ok(()) }\n```"
);
lambda_schedule!(
    MultiplicativeLR,
    "MultiplicativeLR",
    "`torch.optim.lr_scheduler.MultiplicativeLR`: at every step the rate is multiplied by \
     `f(step)` (chainable)."
);

impl LambdaLR {
    /// Not chainable: torch's `base_lrs` are the optimizer's first rates.
    fn chained_base(&self, _lr: f64, initial_lr: f64) -> f64 {
        initial_lr
    }
    fn first(&self, _lr: f64) -> Result<f64> {
        Ok(self.base_lr * self.factor()?)
    }
    fn next(&self, _lr: f64) -> Result<f64> {
        Ok(self.base_lr * self.factor()?)
    }
}

impl MultiplicativeLR {
    /// Chainable: it starts from the rate the schedules before it left.
    fn chained_base(&self, lr: f64, _initial_lr: f64) -> f64 {
        lr
    }
    fn first(&self, lr: f64) -> Result<f64> {
        Ok(lr)
    }
    fn next(&self, lr: f64) -> Result<f64> {
        Ok(lr * self.factor()?)
    }
}
