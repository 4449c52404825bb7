//! What a trial run changes and must put back: the weights (parameters and buffers), the
//! optimizer's state and rates, and the CPU random generator. The learning-rate range test and
//! the batch-size finder take a [`RestorePoint`] before they train and restore it after,
//! whatever happened (Lightning saves and restores a checkpoint around its tuners).
use tch::nn::VarStore;
use tch::Tensor;

use crate::rng::{cpu_rng_state, set_cpu_rng_state};
use crate::train::{Optimizer, OptimizerMeta};
use crate::Result;

/// Copies of the weights, the optimizer's state and the CPU generator's state.
pub(crate) struct RestorePoint {
    /// Each variable and a copy of its value.
    weights: Vec<(Tensor, Tensor)>,
    optimizer: Vec<(String, Tensor)>,
    meta: OptimizerMeta,
    rng: Vec<u8>,
}

impl RestorePoint {
    /// Copies what `vs` and `optimizer` hold now, and the CPU generator's state.
    pub fn take(vs: &VarStore, optimizer: &Optimizer) -> Result<RestorePoint> {
        let weights = vs.variables().into_values().map(|v| (v.shallow_clone(), v.copy())).collect();
        let (state, meta) = optimizer.state_dict();
        let optimizer = state.into_iter().map(|(n, t)| (n, t.copy())).collect();
        Ok(RestorePoint { weights, optimizer, meta, rng: cpu_rng_state()? })
    }

    /// Puts everything back as it was when taken (the gradients are zeroed).
    pub fn restore(self, optimizer: &mut Optimizer) -> Result<()> {
        tch::no_grad(|| {
            for (var, saved) in &self.weights {
                let mut var = var.shallow_clone();
                var.copy_(saved);
            }
        });
        optimizer.zero_grad();
        optimizer.load_state_dict_owned(self.optimizer, &self.meta)?;
        set_cpu_rng_state(&self.rng)
    }
}
