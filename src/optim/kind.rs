//! What an [`Optimizer`](super::Optimizer) computes and how: the update rule with its
//! hyper-parameters ([`OptimizerKind`], torch.optim's defaults) and the kernels that run it
//! ([`Kernels`]: multi-tensor as torch's `foreach`/`fused`, or torch's single-tensor loop).
use serde::{Deserialize, Serialize};

/// Which update rule, with its hyper-parameters (torch's defaults via `Default`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum OptimizerKind {
    /// `torch.optim.SGD`, with the arguments of the same names.
    Sgd {
        /// Momentum factor (0: plain SGD).
        momentum: f64,
        /// Dampening of the momentum (0 in torch's default).
        dampening: f64,
        /// Nesterov momentum.
        nesterov: bool,
        /// L2 penalty added to the gradient (`grad + weight_decay * param`).
        weight_decay: f64,
    },
    /// `torch.optim.Adam`; `beta1`/`beta2` are torch's `betas`.
    Adam {
        /// Decay of the running mean of gradients (`betas[0]`).
        beta1: f64,
        /// Decay of the running mean of squared gradients (`betas[1]`).
        beta2: f64,
        /// Added to the denominator for numerical stability.
        eps: f64,
        /// L2 penalty added to the gradient (coupled, unlike AdamW).
        weight_decay: f64,
    },
    /// `torch.optim.AdamW`: Adam with decoupled weight decay.
    AdamW {
        /// Decay of the running mean of gradients (`betas[0]`).
        beta1: f64,
        /// Decay of the running mean of squared gradients (`betas[1]`).
        beta2: f64,
        /// Added to the denominator for numerical stability.
        eps: f64,
        /// Decoupled weight decay: each step multiplies the parameters by `1 - lr * weight_decay`.
        weight_decay: f64,
    },
    /// An [`UpdateRule`](crate::train::UpdateRule): RMSprop, NAdam, RAdam or one of one's own
    /// ([`Optimizer::with_rule`](super::Optimizer::with_rule); the rule itself is the
    /// optimizer's, [`Optimizer::rule`](super::Optimizer::rule)).
    Rule {
        /// The rule's weight decay, which param groups may replace.
        weight_decay: f64,
    },
}

impl OptimizerKind {
    /// `torch.optim.SGD` defaults (momentum 0, no weight decay).
    pub fn sgd() -> Self {
        OptimizerKind::Sgd { momentum: 0.0, dampening: 0.0, nesterov: false, weight_decay: 0.0 }
    }
    /// `torch.optim.Adam` defaults: betas (0.9, 0.999), eps 1e-8, weight decay 0.
    pub fn adam() -> Self {
        OptimizerKind::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 }
    }
    /// `torch.optim.AdamW` defaults: betas (0.9, 0.999), eps 1e-8, weight decay 0.01.
    pub fn adamw() -> Self {
        OptimizerKind::AdamW { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.01 }
    }
    /// SGD's momentum or Adam's and AdamW's beta1; `None` for a rule (its momentum is the
    /// rule's own: [`UpdateRule::momentum`](super::UpdateRule::momentum)).
    pub fn momentum(&self) -> Option<f64> {
        match *self {
            OptimizerKind::Sgd { momentum, .. } => Some(momentum),
            OptimizerKind::Adam { beta1, .. } | OptimizerKind::AdamW { beta1, .. } => Some(beta1),
            OptimizerKind::Rule { .. } => None,
        }
    }
}

/// How [`Optimizer::step`](super::Optimizer::step) runs the update (the same rule either way; results agree within
/// float32 rounding, as torch.optim's implementations do).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kernels {
    /// libtorch's multi-tensor kernels: torch.optim's `foreach=True` for SGD (`_foreach_*`)
    /// and `fused=True` for Adam/AdamW (`_fused_adam_`, `_fused_adamw_`).
    #[default]
    MultiTensor,
    /// torch.optim's single-tensor loop (`foreach=False, fused=False`): a few kernels per
    /// parameter.
    PerTensor,
}
