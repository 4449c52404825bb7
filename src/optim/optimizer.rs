//! Optimizers with torch.optim's update rules and defaults (SGD with momentum/nesterov/weight
//! decay, Adam, AdamW), whose state (step counts, moments, momentum buffers) can be exported
//! to named tensors and restored, so checkpoints resume exactly.
//!
//! By default the update runs as libtorch's multi-tensor kernels, as torch.optim does with
//! `foreach=True` (SGD: `_foreach_*` ops) or `fused=True` (Adam/AdamW: `_fused_adam_`): a
//! handful of kernel launches per step instead of several per parameter.
//! [`Kernels::PerTensor`] keeps torch.optim's single-tensor loop (`foreach=False`).
use std::collections::BTreeMap;

use tch::nn::VarStore;
use tch::Tensor;

use super::group_settings::GroupSettings;
use super::kind::{Kernels, OptimizerKind};
use super::state::ParamState;
use crate::models::named_parameters;
use crate::{Error, Result};

/// A parameter with its name and gradient, as the multi-tensor update takes it.
type GradEntry = (String, Tensor, Tensor);

/// An optimizer over a model's trainable parameters, e.g. `Optimizer::sgd(&vs, 0.01, 0.9)`;
/// call [`zero_grad`](Self::zero_grad), run backward, then [`step`](Self::step). All
/// parameters start in one group (torch's single param group) with one learning rate, which
/// schedules set with [`set_lr`](Self::set_lr); [`param_group`](Self::param_group) moves some
/// into groups with their own rate and weight decay, as torch's `param_groups`.
///
/// # Example
///
/// ```no_run
/// # fn main() -> trainbook::Result<()> {
/// use tch::nn::{ModuleT, VarStore};
/// use tch::{Device, Kind, Tensor};
/// use trainbook::models::MnistNet;
/// use trainbook::train::{CrossEntropyLoss, Optimizer, OptimizerKind};
/// let vs = VarStore::new(Device::Cpu);
/// let net = MnistNet::new(&vs.root());
/// // torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
/// let kind =
///     OptimizerKind::Sgd { momentum: 0.9, dampening: 0.0, nesterov: false, weight_decay: 5e-4 };
/// let mut opt = Optimizer::new(&vs, kind, 0.01);
/// let x = Tensor::randn([8, 1, 28, 28], (Kind::Float, Device::Cpu));
/// let y = Tensor::zeros([8], (Kind::Int64, Device::Cpu));
/// opt.zero_grad();
/// CrossEntropyLoss::new().mean(&net.forward_t(&x, true), &y).backward();
/// opt.step()?;
/// # Ok(()) }
/// ```
pub struct Optimizer {
    pub(super) kind: OptimizerKind,
    pub(super) kernels: Kernels,
    pub(super) params: Vec<(String, Tensor)>,
    /// The group of each parameter (an index into `groups`), parallel to `params`.
    pub(super) group_of: Vec<usize>,
    /// Group 0 holds what no [`ParamGroup`](super::ParamGroup) took.
    pub(super) groups: Vec<GroupSettings>,
    pub(super) state: BTreeMap<String, ParamState>,
    /// The update rule of an optimizer made with [`with_rule`](Self::with_rule).
    pub(super) rule: Option<super::rule::SharedRule>,
}

impl Optimizer {
    /// An optimizer over all trainable variables of `vs` (frozen ones, whose gradient stays
    /// undefined, are skipped at each step like torch skips `grad is None`).
    pub fn new(vs: &VarStore, kind: OptimizerKind, lr: f64) -> Optimizer {
        let params = named_parameters(vs);
        Optimizer {
            kind,
            kernels: Kernels::default(),
            group_of: vec![0; params.len()],
            params,
            groups: vec![GroupSettings {
                label: "default".into(),
                lr,
                weight_decay: None,
                momentum: None,
            }],
            state: BTreeMap::new(),
            rule: None,
        }
    }
    /// `torch.optim.SGD(params, lr, momentum)`: no dampening, no Nesterov, no weight decay.
    pub fn sgd(vs: &VarStore, lr: f64, momentum: f64) -> Optimizer {
        Optimizer::new(
            vs,
            OptimizerKind::Sgd { momentum, dampening: 0.0, nesterov: false, weight_decay: 0.0 },
            lr,
        )
    }
    /// `torch.optim.Adam(params, lr)` with torch's defaults ([`OptimizerKind::adam`]).
    pub fn adam(vs: &VarStore, lr: f64) -> Optimizer {
        Optimizer::new(vs, OptimizerKind::adam(), lr)
    }
    /// `torch.optim.AdamW(params, lr)` with torch's defaults ([`OptimizerKind::adamw`],
    /// weight decay 0.01).
    pub fn adamw(vs: &VarStore, lr: f64) -> Optimizer {
        Optimizer::new(vs, OptimizerKind::adamw(), lr)
    }

    /// Chooses how the update runs (default [`Kernels::MultiTensor`]); the state carries over.
    pub fn with_kernels(mut self, kernels: Kernels) -> Self {
        self.set_kernels(kernels);
        self
    }
    /// See [`with_kernels`](Self::with_kernels).
    pub fn set_kernels(&mut self, kernels: Kernels) {
        for st in self.state.values_mut() {
            st.sync_step();
        }
        self.kernels = kernels;
    }
    /// How the update runs.
    pub fn kernels(&self) -> Kernels {
        self.kernels
    }

    /// The update rule and its hyper-parameters.
    pub fn kind(&self) -> OptimizerKind {
        self.kind
    }
    /// The current learning rate of the default group (`param_groups[0]["lr"]`).
    pub fn lr(&self) -> f64 {
        self.groups[0].lr
    }
    /// Sets the learning rate of every group for the next steps (what a torch user does with
    /// `for g in optimizer.param_groups: g["lr"] = lr`); a schedule sets each group's own
    /// rate with [`set_group_lrs`](Self::set_group_lrs).
    pub fn set_lr(&mut self, lr: f64) {
        for g in &mut self.groups {
            g.lr = lr;
        }
    }
    /// The parameters this optimizer updates, with their names, in creation order.
    pub fn parameters(&self) -> &[(String, Tensor)] {
        &self.params
    }

    /// Drops every parameter's gradient before the next backward pass, as torch's
    /// `zero_grad()` (`set_to_none=True`, its default): the backward pass then hands each
    /// parameter its new gradient where zeroed gradients would take one more kernel per
    /// parameter to add it in, and the old gradients' memory is free in between. Parameters
    /// left out of the next backward keep no gradient and are skipped by [`step`](Self::step).
    pub fn zero_grad(&mut self) {
        let params: Vec<&Tensor> = self.params.iter().map(|(_, p)| p).collect();
        // The shim's only errors are null pointers, which a `&Tensor` never is.
        super::kernels::set_grads_to_none(&params)
            .expect("setting gradients to None takes live tensors");
    }

    /// The parameters this optimizer updates.
    pub(crate) fn param_tensors(&self) -> impl Iterator<Item = &Tensor> {
        self.params.iter().map(|(_, p)| p)
    }

    /// Zeroes every parameter's gradient in place, as torch's `zero_grad(set_to_none=False)`:
    /// a gradient that is part of a graph is detached first; one that is a view (DDP's
    /// `gradient_as_bucket_view`) is zeroed where it lives.
    pub fn zero_grad_in_place(&mut self) {
        for (_, p) in &self.params {
            let mut grad = p.grad();
            if grad.defined() {
                if grad.requires_grad() {
                    let _ = grad.detach_();
                }
                let _ = grad.zero_();
            }
        }
    }

    /// One update of every parameter that has a gradient (frozen parameters and those that
    /// took no part in the loss keep an undefined gradient and are skipped, as in torch).
    pub fn step(&mut self) -> Result<()> {
        self.update(None)
    }

    /// Whether [`GradScaler`](crate::train::GradScaler) can skip this optimizer's step on the
    /// device, without reading its inf flag on the host: SGD, once every parameter with a
    /// gradient has its momentum buffer (a skipped first step must not create one, as torch's
    /// does not). Fused Adam/AdamW skip inside their kernel
    /// ([`fuses_loss_scaling`](Self::fuses_loss_scaling)); per-tensor Adam/AdamW need the
    /// step count on the host for their bias corrections, so the flag is read for them.
    pub(crate) fn skips_on_device(&self) -> bool {
        match self.kind {
            OptimizerKind::Sgd { .. } => {
                self.groups.iter().all(|g| g.rule(self.kind).0.momentum() == Some(0.0))
                    || self.params.iter().all(|(name, p)| {
                        !p.grad().defined()
                            || self.state.get(name).is_some_and(|st| st.momentum_buffer.is_some())
                    })
            }
            OptimizerKind::Adam { .. } | OptimizerKind::AdamW { .. } => false,
            OptimizerKind::Rule { .. } => false,
        }
    }

    /// [`step`](Self::step), except that nothing changes (parameters, momentum buffers, step
    /// counts) where `found_inf` (GradScaler's float32 flag, on the parameters' device) is 1;
    /// decided on the device, without a read. When the flag is 0 the result is bit for bit
    /// that of `step`. Only where [`skips_on_device`](Self::skips_on_device); errors
    /// ([`Error::InvalidArgument`]) otherwise.
    pub(crate) fn step_skipping(&mut self, found_inf: &Tensor) -> Result<()> {
        if !self.skips_on_device() {
            return Err(Error::InvalidArgument(format!(
                "{:?} cannot skip a step on the device before its state exists",
                self.kind
            )));
        }
        self.update(Some(found_inf))
    }

    fn update(&mut self, skip_if: Option<&Tensor>) -> Result<()> {
        if let Some(rule) = self.rule.clone() {
            return self.rule_step(&rule);
        }
        if self.kernels == Kernels::PerTensor {
            let adam = !matches!(self.kind, OptimizerKind::Sgd { .. });
            tch::no_grad(|| {
                for ((name, p), &g) in self.params.iter_mut().zip(&self.group_of) {
                    let grad = p.grad();
                    if grad.defined() {
                        let st = self.state.entry(name.clone()).or_default();
                        if adam {
                            // Adam's bias corrections take the count on the host (after fused Adam).
                            st.sync_step();
                        }
                        let (kind, lr) = self.groups[g].rule(self.kind);
                        super::single_tensor::update(kind, lr, p, &grad, st, skip_if);
                    }
                }
            });
            return Ok(());
        }
        self.multi_tensor_step(None, skip_if)
    }

    /// Whether [`GradScaler`](crate::train::GradScaler) can hand the scale and the inf flag to this
    /// optimizer's kernel (fused Adam/AdamW), which then unscales and skips by itself.
    pub fn fuses_loss_scaling(&self) -> bool {
        self.kernels == Kernels::MultiTensor
            && matches!(self.kind, OptimizerKind::Adam { .. } | OptimizerKind::AdamW { .. })
    }

    /// A fused step on gradients still multiplied by `grad_scale`; nothing changes (not even
    /// the step counts) when `found_inf` is 1. Only for
    /// [`fuses_loss_scaling`](Self::fuses_loss_scaling) optimizers; errors
    /// ([`Error::InvalidArgument`]) otherwise.
    pub fn step_scaled(&mut self, grad_scale: &Tensor, found_inf: &Tensor) -> Result<()> {
        if !self.fuses_loss_scaling() {
            return Err(Error::InvalidArgument(format!(
                "{:?} with {:?} kernels cannot take a loss scale; unscale the gradients first",
                self.kind, self.kernels
            )));
        }
        self.multi_tensor_step(Some((grad_scale, found_inf)), None)
    }

    fn multi_tensor_step(
        &mut self,
        scaled: Option<(&Tensor, &Tensor)>,
        skip_if: Option<&Tensor>,
    ) -> Result<()> {
        // libtorch's multi-tensor kernels take one device and dtype per call: torch splits each
        // param group that way.
        let mut groups: BTreeMap<(usize, String), Vec<GradEntry>> = BTreeMap::new();
        for ((n, p), &g) in self.params.iter().zip(&self.group_of) {
            let grad = p.grad();
            if grad.defined() {
                let key = (g, format!("{:?}/{:?}", p.device(), p.kind()));
                groups.entry(key).or_default().push((n.clone(), p.shallow_clone(), grad));
            }
        }
        for ((g, _), group) in &groups {
            let (kind, lr) = self.groups[*g].rule(self.kind);
            let scaled = scaled.map(|(grad_scale, found_inf)| super::multi_tensor::ScaledStep {
                grad_scale,
                found_inf,
            });
            tch::no_grad(|| {
                super::multi_tensor::step_group(kind, lr, group, &mut self.state, scaled, skip_if)
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use tch::nn::{Module, VarStore};
    use tch::{Device, Kind, Tensor};

    use super::Optimizer;

    fn backward(lin: &tch::nn::Linear) {
        lin.forward(&Tensor::ones([2, 3], (Kind::Float, Device::Cpu))).sum(Kind::Float).backward();
    }

    #[test]
    fn zero_grad_sets_to_none_and_zero_grad_in_place_zeroes() {
        let vs = VarStore::new(Device::Cpu);
        let lin = tch::nn::linear(vs.root() / "fc", 3, 2, Default::default());
        let mut opt = Optimizer::sgd(&vs, 0.1, 0.0);
        backward(&lin);
        assert!(lin.ws.grad().defined());
        opt.zero_grad();
        assert!(!lin.ws.grad().defined(), "as torch's p.grad is None after zero_grad()");
        // The next backward's gradient is the gradient itself, not a sum with the old one.
        backward(&lin);
        assert_eq!(Vec::<f32>::try_from(lin.ws.grad().flatten(0, -1)).unwrap(), [2.0; 6]);
        opt.zero_grad_in_place();
        assert!(lin.ws.grad().defined());
        assert_eq!(lin.ws.grad().abs().sum(Kind::Float).double_value(&[]), 0.0);
    }
}
