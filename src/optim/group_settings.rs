//! [`GroupSettings`], a param group as the optimizer keeps it (its label, rate, weight decay
//! and momentum), and the update rule its parameters get.
use super::kind::OptimizerKind;

/// A group as the optimizer keeps it: its label, rate, weight decay and momentum (`None`: the
/// kind's).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct GroupSettings {
    pub(super) label: String,
    pub(super) lr: f64,
    pub(super) weight_decay: Option<f64>,
    /// SGD's momentum or Adam's beta1 for this group (a schedule's per-group momentum).
    pub(super) momentum: Option<f64>,
}

impl GroupSettings {
    /// The update rule and rate for this group's parameters: `kind` with the group's weight
    /// decay and momentum, where it sets them.
    pub(super) fn rule(&self, kind: OptimizerKind) -> (OptimizerKind, f64) {
        let kind = match kind {
            OptimizerKind::Sgd { momentum, dampening, nesterov, weight_decay } => {
                OptimizerKind::Sgd {
                    momentum: self.momentum.unwrap_or(momentum),
                    dampening,
                    nesterov,
                    weight_decay: self.weight_decay.unwrap_or(weight_decay),
                }
            }
            OptimizerKind::Adam { beta1, beta2, eps, weight_decay } => OptimizerKind::Adam {
                beta1: self.momentum.unwrap_or(beta1),
                beta2,
                eps,
                weight_decay: self.weight_decay.unwrap_or(weight_decay),
            },
            OptimizerKind::AdamW { beta1, beta2, eps, weight_decay } => OptimizerKind::AdamW {
                beta1: self.momentum.unwrap_or(beta1),
                beta2,
                eps,
                weight_decay: self.weight_decay.unwrap_or(weight_decay),
            },
            OptimizerKind::Rule { weight_decay } => {
                OptimizerKind::Rule { weight_decay: self.weight_decay.unwrap_or(weight_decay) }
            }
        };
        (kind, self.lr)
    }
}
