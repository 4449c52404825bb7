//! The run's built-in parts that keep state between epochs (early stopping, the learning-rate
//! schedule, the float16 loss scaler, the EMA of the weights, the data layout) and the frozen backbone's epochs.
//! [`RunParts`] holds those a checkpoint saves: each by its [`Stateful`] key, all of them in one
//! list, so a new part is its own file plus one line in `run_parts!` below; the user's
//! callbacks that keep state join that list (`callback_part.rs`).
use std::cell::RefCell;
use std::rc::Rc;

pub(crate) mod callback_part;
pub(crate) mod data_layout;
pub(crate) mod early_stopping;
pub(crate) mod freeze;
pub(crate) mod run_schedule;

pub use early_stopping::EarlyStopping;

use tch::nn::VarStore;

use crate::dist::Dist;
use crate::fit::config::FitConfig;
use crate::stateful::{PartState, Stateful};
use crate::train::{GradScaler, ModelEma, Precision};
use crate::Result;
use callback_part::{stateful_callbacks, CallbackPart};
use data_layout::DataLayout;
use run_schedule::RunSchedule;

/// A part that two holders share: the epoch's steps (through
/// [`EpochOptions::grad_scaler`](crate::train::EpochOptions::grad_scaler)) and the run's
/// checkpoints. [`handle`](Self::handle) is the steps' copy.
pub(crate) struct SharedPart<T>(Rc<RefCell<T>>);

impl<T> SharedPart<T> {
    pub(crate) fn new(part: T) -> SharedPart<T> {
        SharedPart(Rc::new(RefCell::new(part)))
    }
    /// Another handle to the same part.
    pub(crate) fn handle(&self) -> Rc<RefCell<T>> {
        self.0.clone()
    }
}

impl<T: Stateful> Stateful for SharedPart<T> {
    fn state_key(&self) -> String {
        self.0.borrow().state_key()
    }
    fn state_dict(&self) -> Result<PartState> {
        self.0.borrow().state_dict()
    }
    fn load_state_dict(&mut self, state: PartState) -> Result<()> {
        self.0.borrow_mut().load_state_dict(state)
    }
}

/// Declares [`RunParts`] with one optional field per part and the two lists over them.
macro_rules! run_parts {
    ($($(#[$doc:meta])* $field:ident: $ty:ty,)*) => {
        /// The parts of a run that checkpoints keep (each `None` when the run does not use it).
        #[derive(Default)]
        pub(crate) struct RunParts {
            $($(#[$doc])* pub $field: Option<$ty>,)*
            /// The user's callbacks that keep state, each under its own key.
            pub callbacks: Vec<callback_part::CallbackPart>,
        }

        impl RunParts {
            /// Every part the run has, for a checkpoint.
            pub(crate) fn each(&self) -> Vec<&dyn Stateful> {
                let mut parts: Vec<&dyn Stateful> = Vec::new();
                $(if let Some(p) = &self.$field { parts.push(p); })*
                parts.extend(self.callbacks.iter().map(|c| c as &dyn Stateful));
                parts
            }
            /// Every part the run has, for a resume.
            pub(crate) fn each_mut(&mut self) -> Vec<&mut dyn Stateful> {
                let mut parts: Vec<&mut dyn Stateful> = Vec::new();
                $(if let Some(p) = &mut self.$field { parts.push(p); })*
                parts.extend(self.callbacks.iter_mut().map(|c| c as &mut dyn Stateful));
                parts
            }
        }
    };
}

/// The keys of the built-in parts (whether or not a run has them on): a callback of one's own
/// may not keep its state under one of these.
pub(crate) const BUILT_IN_KEYS: [&str; 5] =
    ["schedule", "grad_scaler", "early_stopping", "ema", "data_layout"];

run_parts! {
    /// The learning-rate schedule (`FitConfig::schedule`), key `schedule`.
    schedule: RunSchedule,
    /// float16's loss scaler, key `grad_scaler`.
    scaler: SharedPart<GradScaler>,
    /// Early stopping's counters, key `early_stopping`.
    early: EarlyStopping,
    /// The EMA of the weights, key `ema`.
    ema: ModelEma,
    /// Ranks x per-rank batch x accumulation, key `data_layout`: a resume on another rank
    /// count keeps the global batch.
    data_layout: data_layout::DataLayout,
}

/// The parts a run's settings ask for, built in this one place: the settings are checked by
/// [`check`](Self::check) before anything runs (a bad schedule, early-stopping setting or
/// callback key is an error naming it), and [`build`](Self::build) makes the parts once the
/// model is wrapped and the checkpoint to resume from is known.
pub(crate) struct PartsPlan {
    schedule: Option<RunSchedule>,
    early: Option<EarlyStopping>,
    callbacks: Vec<CallbackPart>,
}

impl PartsPlan {
    /// Checks the parts' settings of `cfg` for an optimizer of `groups` param groups.
    pub(crate) fn check(cfg: &FitConfig, groups: usize) -> Result<PartsPlan> {
        let schedule =
            cfg.schedule.as_deref().map(|s| RunSchedule::new(Some(s), groups)).transpose()?;
        let mut early = cfg.early_stopping.clone();
        if let Some(e) = &mut early {
            e.validate()?;
            e.monitor = cfg.monitor.unwrap_or(e.monitor);
        }
        // The user's callbacks that keep state, their keys checked before anything runs.
        let callbacks = stateful_callbacks(&cfg.callbacks, &BUILT_IN_KEYS)?;
        Ok(PartsPlan { schedule, early, callbacks })
    }

    /// The run's parts on `dist`, for the model in `vs` and a training batch of `batch_size`.
    pub(crate) fn build(
        self,
        cfg: &FitConfig,
        dist: &Dist,
        vs: &VarStore,
        batch_size: usize,
    ) -> Result<RunParts> {
        Ok(RunParts {
            schedule: self.schedule,
            // float16 needs loss scaling; bfloat16 has float32's range and does not.
            scaler: (cfg.precision == Precision::F16)
                .then(|| SharedPart::new(GradScaler::new(dist.device()))),
            early: self.early,
            // The average starts from the weights every rank now holds (rank 0's, broadcast,
            // or the checkpoint's when it holds no average).
            ema: cfg.ema.map(|decay| ModelEma::of_run(vs, decay, cfg.ema_cadence)).transpose()?,
            data_layout: Some(DataLayout::of(dist, batch_size, cfg.accumulate)),
            callbacks: self.callbacks,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::Monitor;
    use tch::Device;

    #[test]
    fn the_parts_are_listed_by_their_keys_and_a_shared_one_is_one_part() {
        let mut parts = RunParts {
            scaler: Some(SharedPart::new(GradScaler::new(Device::Cpu))),
            early: Some(EarlyStopping::new(Monitor::ValLoss, 2)),
            ..Default::default()
        };
        let keys: Vec<String> = parts.each().iter().map(|p| p.state_key()).collect();
        assert_eq!(keys, ["grad_scaler", "early_stopping"]);
        let steps = parts.scaler.as_ref().unwrap().handle();
        steps.borrow_mut().load_state(&crate::train::GradScalerState {
            scale: 8.0,
            ..GradScaler::new(Device::Cpu).state()
        });
        let saved = parts.each()[0].state_dict().unwrap();
        assert_eq!(saved.value["scale"], 8.0, "the checkpoint sees the steps' scaler");
        let fresh = GradScaler::new(Device::Cpu).state();
        parts.each_mut()[0].load_state_dict(PartState::of_serde(&fresh).unwrap()).unwrap();
        assert_eq!(steps.borrow().state(), fresh, "a resume reaches the steps' scaler");
    }

    #[test]
    fn the_built_in_keys_are_the_keys_of_the_built_in_parts() {
        let dist = crate::dist::Dist::single(Device::Cpu);
        let vs = tch::nn::VarStore::new(Device::Cpu);
        let _w = vs.root().zeros("w", &[2]);
        let step = crate::train::StepLR::new(1, 0.5);
        let parts = RunParts {
            schedule: Some(RunSchedule::new(Some(&step), 1).unwrap()),
            scaler: Some(SharedPart::new(GradScaler::new(Device::Cpu))),
            early: Some(EarlyStopping::new(Monitor::ValLoss, 2)),
            ema: Some(ModelEma::new(&vs, 0.9).unwrap()),
            data_layout: Some(data_layout::DataLayout::of(&dist, 4, 1)),
            callbacks: Vec::new(),
        };
        let keys: Vec<String> = parts.each().iter().map(|p| p.state_key()).collect();
        assert_eq!(keys, BUILT_IN_KEYS);
    }
}
