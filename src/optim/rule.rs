//! Update rules beyond SGD and Adam: the [`UpdateRule`] trait, torch.optim's single-tensor step of
//! one parameter with its state as named tensors. An [`Optimizer`](super::Optimizer) built with
//! [`Optimizer::with_rule`](super::Optimizer::with_rule) runs it for every parameter with a gradient, and gives it everything
//! an optimizer has in trainbook: param groups (their rate and weight decay), `fit`, GradScaler
//! (the step is skipped on the host when the gradients are not finite), clipping, schedules and
//! checkpoints (the state tensors under `<param>.<name>`, the step counts in the metadata).
//! RMSprop, NAdam, RAdam, Adagrad, Adadelta and Adamax are built on it, one file each in
//! `rules/`.
use std::collections::BTreeMap;
use std::sync::Arc;

use tch::Tensor;

use crate::Result;

/// What one step of a rule gets besides the tensors: the parameter's group's rate and weight
/// decay, and its step count (this step included: 1 on the first step, as torch counts before
/// updating).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RuleStep {
    /// The learning rate of the parameter's group.
    pub lr: f64,
    /// The weight decay of the parameter's group (the rule's own unless a group sets one).
    pub weight_decay: f64,
    /// Steps taken by this parameter, this one included.
    pub step: u64,
}

/// A parameter's state tensors by name (`square_avg`, `momentum_buffer`, ...: torch's names),
/// created on the first step as the rule creates them and kept in checkpoints.
#[derive(Default)]
pub struct RuleState {
    tensors: BTreeMap<String, Tensor>,
}

impl RuleState {
    /// The tensor called `name`, made by `init` the first time (e.g. `|| p.zeros_like()`).
    pub fn get_or_insert_with(&mut self, name: &str, init: impl FnOnce() -> Tensor) -> &mut Tensor {
        self.tensors.entry(name.to_string()).or_insert_with(init)
    }
    /// The tensor called `name`, if made.
    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.tensors.get(name)
    }
    /// Every tensor, by name.
    pub fn tensors(&self) -> &BTreeMap<String, Tensor> {
        &self.tensors
    }
    pub(super) fn insert(&mut self, name: String, t: Tensor) {
        self.tensors.insert(name, t);
    }
}

/// An optimizer's update rule: torch.optim's `_single_tensor_*` function for one parameter.
/// Write it with [`ops`](crate::train::ops) where torch passes `alpha=` or `value=`, and it runs
/// torch's kernels.
///
/// ```
/// use std::sync::Arc;
/// use tch::{nn::VarStore, Device, Tensor};
/// use trainbook::train::{ops, Optimizer, RuleState, RuleStep, UpdateRule};
///
/// /// signSGD: each parameter moves by the learning rate against its gradient's sign.
/// struct SignSgd;
///
/// impl UpdateRule for SignSgd {
///     fn name(&self) -> &str { "SignSGD" }
///     fn update(&self, s: &RuleStep, p: &mut Tensor, grad: &Tensor, _: &mut RuleState) -> trainbook::Result<()> {
///         ops::add_(p, &grad.sign(), -s.lr)
///     }
/// }
///
/// let vs = VarStore::new(Device::Cpu);
/// let w = vs.root().var_copy("w", &Tensor::from_slice(&[1.0f32, 1.0]));
/// let mut opt = Optimizer::with_rule(&vs, Arc::new(SignSgd), 0.25);
/// (&w * Tensor::from_slice(&[3.0f32, -2.0])).sum(tch::Kind::Float).backward();
/// opt.step()?;
/// assert_eq!(Vec::<f32>::try_from(&w)?, [0.75, 1.25]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait UpdateRule: Send + Sync {
    /// torch's class name (`"RMSprop"`): messages, and the check that a checkpoint's state is
    /// this rule's.
    fn name(&self) -> &str;
    /// The rule's weight decay, which a param group may replace. Default 0.
    fn weight_decay(&self) -> f64 {
        0.0
    }
    /// The momentum a schedule may move (torch's `momentum`, or `betas[0]`); `None` (the
    /// default) for a rule without one.
    fn momentum(&self) -> Option<f64> {
        None
    }
    /// The same rule with that momentum set to `m` (what `OneCycleLR`'s `cycle_momentum` writes
    /// into torch's param groups, through [`Optimizer::set_momentum`](super::Optimizer::set_momentum)); `None` (the default) for a
    /// rule without one.
    fn with_momentum(&self, _m: f64) -> Option<SharedRule> {
        None
    }
    /// One step of one parameter `p` (under `no_grad`) from its gradient.
    fn update(
        &self,
        step: &RuleStep,
        p: &mut Tensor,
        grad: &Tensor,
        state: &mut RuleState,
    ) -> Result<()>;
}

/// A shared rule (an [`Optimizer`](super::Optimizer) holds one).
pub type SharedRule = Arc<dyn UpdateRule>;
