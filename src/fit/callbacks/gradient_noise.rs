//! [`GradientNoise`]: annealed Gaussian noise added to the gradients before every optimizer step
//! (Neelakantan et al., "Adding Gradient Noise Improves Learning for Very Deep Networks", 2015),
//! with the schedule of optax's `add_noise(eta, gamma, seed)`. A callback with state: its step
//! count is saved in checkpoints, so a resumed run draws what the uninterrupted one drew.
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};
use serde::{Deserialize, Serialize};
use tch::Tensor;

use super::Callback;
use crate::stateful::PartState;
use crate::train::BeforeOptimizerStep;
use crate::{Error, Result};

/// Gaussian noise added to every gradient before each optimizer step, annealed as optax's
/// `add_noise(eta, gamma, seed)` anneals it: at the `t`-th step (from 1) the variance is
/// `eta / t^gamma`, and each gradient becomes `g + sqrt(eta / t^gamma) * n` with `n` standard
/// normal, drawn in the gradient's dtype. The paper's settings are `eta` in {0.01, 0.3, 1.0}
/// and `gamma = 0.55`.
///
/// The draws come from a ChaCha8 stream keyed by `seed` and `t` (not from libtorch's generator),
/// the parameters in the optimizer's order: every rank of a DDP run adds the same noise to the
/// same all-reduced gradients, and the step count is the callback's checkpointed state (key
/// `gradient_noise`), so a resumed run adds what the uninterrupted one added. Parameters without
/// a gradient get none. Register it with [`Trainer::callback`](crate::fit::Trainer::callback).
///
/// ```
/// use trainbook::fit::GradientNoise;
/// let noise = GradientNoise::new(0.01, 0.55, 0)?;
/// assert!((noise.std_at(1) - 0.1).abs() < 1e-12);
/// assert!(noise.std_at(100) < noise.std_at(1));
/// assert!(GradientNoise::new(-1.0, 0.55, 0).is_err());
/// # Ok::<(), trainbook::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct GradientNoise {
    eta: f64,
    gamma: f64,
    seed: u64,
    /// Optimizer steps noised so far.
    steps: u64,
}

/// The checkpointed state: the steps noised so far.
#[derive(Serialize, Deserialize)]
struct NoiseState {
    steps: u64,
}

impl GradientNoise {
    /// The noise of optax's `add_noise(eta, gamma, seed)`. Errors ([`Error::InvalidArgument`]
    /// naming the value): `eta` not finite or negative, `gamma` not finite or negative.
    pub fn new(eta: f64, gamma: f64, seed: u64) -> Result<GradientNoise> {
        for (name, v) in [("eta", eta), ("gamma", gamma)] {
            if !v.is_finite() || v < 0.0 {
                return Err(Error::InvalidArgument(format!(
                    "GradientNoise: {name} = {v}; it must be finite and >= 0"
                )));
            }
        }
        Ok(GradientNoise { eta, gamma, seed, steps: 0 })
    }

    /// The standard deviation at the `t`-th step (from 1): `sqrt(eta / t^gamma)`.
    pub fn std_at(&self, t: u64) -> f64 {
        (self.eta / (t as f64).powf(self.gamma)).sqrt()
    }

    /// The standard normal draws of the `t`-th step for gradients of `sizes` elements, one
    /// vector per gradient: a ChaCha8 stream keyed by the seed and `t`.
    pub fn draws(&self, t: u64, sizes: &[usize]) -> Vec<Vec<f32>> {
        let mut key = [0u8; 32];
        key[..8].copy_from_slice(&self.seed.to_le_bytes());
        key[8..16].copy_from_slice(&t.to_le_bytes());
        key[16..].copy_from_slice(b"gradient_noise\0\0");
        let mut rng = ChaCha8Rng::from_seed(key);
        sizes.iter().map(|&n| (0..n).map(|_| StandardNormal.sample(&mut rng)).collect()).collect()
    }
}

impl Callback for GradientNoise {
    fn on_before_optimizer_step(&mut self, step: &mut BeforeOptimizerStep) -> Result<()> {
        let t = self.steps + 1;
        let optimizer = step.optimizer()?;
        let mut grads: Vec<Tensor> =
            optimizer.parameters().iter().map(|(_, p)| p.grad()).filter(Tensor::defined).collect();
        let sizes: Vec<usize> = grads.iter().map(|g| g.numel()).collect();
        let std = self.std_at(t);
        for (grad, draws) in grads.iter_mut().zip(self.draws(t, &sizes)) {
            let noise = Tensor::from_slice(&draws)
                .view(grad.size().as_slice())
                .to_device(grad.device())
                .to_kind(grad.kind());
            // optax: g + standard_deviation.astype(g.dtype) * n (the scalar in the
            // tensor's own type, as torch's `mul` with a Python float takes it).
            let _ = grad.f_add_(&(noise * std))?;
        }
        self.steps = t;
        Ok(())
    }

    fn state_key(&self) -> Option<String> {
        Some("gradient_noise".into())
    }
    fn state_dict(&self) -> Result<PartState> {
        PartState::of_serde(&NoiseState { steps: self.steps })
    }
    fn load_state_dict(&mut self, state: PartState) -> Result<()> {
        self.steps = state.parse::<NoiseState>("gradient_noise")?.steps;
        Ok(())
    }
}
