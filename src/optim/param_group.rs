//! Parameter groups, as torch.optim's `param_groups`: a share of the parameters with its own
//! learning rate and weight decay. [`ParamGroup`] says which parameters (by name and tensor)
//! and what they override; [`Optimizer::param_group`](super::Optimizer::param_group) moves
//! them out of the default group into a group of their own. The usual two are timm's "no
//! weight decay on norm layers and biases" ([`ParamGroup::norm_and_bias`]) and a smaller rate
//! for a pretrained backbone ([`ParamGroup::prefix`]).
use std::sync::Arc;

use tch::Tensor;

use super::group_settings::GroupSettings;
use super::Optimizer;
use crate::{Error, Result};

type Select = Arc<dyn Fn(&str, &Tensor) -> bool + Send + Sync>;

/// Which parameters form a group, and the group's own learning rate and weight decay (what a
/// torch user writes as `{"params": [...], "lr": ..., "weight_decay": ...}`); what it does not
/// set comes from the optimizer, as in torch.
///
/// ```
/// use trainbook::train::ParamGroup;
/// let head = ParamGroup::prefix("fc.").lr(0.1);
/// assert_eq!((head.label(), head.lr_override()), ("fc.", Some(0.1)));
/// let no_decay = ParamGroup::norm_and_bias();
/// assert_eq!(no_decay.weight_decay_override(), Some(0.0));
/// ```
#[derive(Clone)]
pub struct ParamGroup {
    label: String,
    select: Select,
    lr: Option<f64>,
    weight_decay: Option<f64>,
}

impl std::fmt::Debug for ParamGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParamGroup")
            .field("label", &self.label)
            .field("lr", &self.lr)
            .field("weight_decay", &self.weight_decay)
            .finish_non_exhaustive()
    }
}

impl ParamGroup {
    /// The parameters for which `select(name, tensor)` is true (`label` names the group in
    /// messages and checkpoints).
    pub fn new(
        label: impl Into<String>,
        select: impl Fn(&str, &Tensor) -> bool + Send + Sync + 'static,
    ) -> ParamGroup {
        ParamGroup { label: label.into(), select: Arc::new(select), lr: None, weight_decay: None }
    }

    /// The parameters whose names start with `prefix` (e.g. `"fc."`, the head of torchvision's
    /// ResNets); labelled by the prefix.
    pub fn prefix(prefix: impl Into<String>) -> ParamGroup {
        let prefix: String = prefix.into();
        let p = prefix.clone();
        ParamGroup::new(prefix, move |name, _| name.starts_with(&p))
    }

    /// timm's `param_groups_weight_decay` rule: every parameter with at most one dimension
    /// (BatchNorm's weight and bias, every bias) or whose name ends in `.bias`, with weight
    /// decay 0. Labelled `no_decay`.
    pub fn norm_and_bias() -> ParamGroup {
        ParamGroup::new("no_decay", |name, t| t.dim() <= 1 || name.ends_with(".bias"))
            .weight_decay(0.0)
    }

    /// torchvision's classification reference's `set_weight_decay` (its `--norm-weight-decay`
    /// and `--bias-weight-decay`) for the trainable parameters of `vs`: with `norm` set, the
    /// parameters of normalisation layers get weight decay `norm` (group `norm`); with `bias`
    /// set, every parameter named `bias` gets weight decay `bias` (group `bias`, which takes a
    /// norm layer's bias first, as torchvision checks its custom keys first); the rest keeps
    /// the optimizer's. A normalisation layer is a module whose `weight` has one dimension
    /// (BatchNorm, LayerNorm, GroupNorm, InstanceNorm with affine parameters: torchvision's
    /// norm classes that have parameters). Groups that would be empty are left out, as
    /// torchvision leaves them out; add the rest in order with
    /// [`Optimizer::param_group`](super::Optimizer::param_group). The same as
    /// [`torchvision_custom_weight_decay`](Self::torchvision_custom_weight_decay) with the one
    /// custom key `bias`.
    ///
    /// ```
    /// use tch::{nn::VarStore, Device};
    /// use trainbook::models::{resnet18, HeadKind};
    /// use trainbook::train::{Optimizer, ParamGroup};
    /// let vs = VarStore::new(Device::Cpu);
    /// let _net = resnet18(&vs.root(), 10, HeadKind::Linear);
    /// let mut opt = Optimizer::sgd(&vs, 0.1, 0.9);
    /// for g in ParamGroup::torchvision_weight_decay(&vs, Some(0.0), None) {
    ///     opt = opt.param_group(g)?;
    /// }
    /// assert_eq!(opt.group_labels(), ["default", "norm"]);
    /// assert!(opt.group_parameter_names(1).contains(&"bn1.bias"));
    /// # Ok::<(), trainbook::Error>(())
    /// ```
    pub fn torchvision_weight_decay(
        vs: &tch::nn::VarStore,
        norm: Option<f64>,
        bias: Option<f64>,
    ) -> Vec<ParamGroup> {
        let custom: Vec<(&str, f64)> = bias.map(|wd| ("bias", wd)).into_iter().collect();
        Self::torchvision_custom_weight_decay(vs, norm, &custom)
    }

    /// torchvision's `set_weight_decay(model, wd, norm_weight_decay, custom_keys_weight_decay=
    /// custom)`: each custom key, in order, takes the parameters it names (a key without a dot
    /// names a parameter's own name, such as `bias` or `class_token`; a key with dots a full
    /// name), into a group of that label with its weight decay; with `norm` set, the other
    /// parameters of normalisation layers go to group `norm` (see
    /// [`torchvision_weight_decay`](Self::torchvision_weight_decay)); the rest keeps the
    /// optimizer's. The reference's `--transformer-embedding-decay D` is the custom keys
    /// `class_token`, `position_embedding` and `relative_position_bias_table`, each with `D`
    /// (after `bias` when `--bias-weight-decay` is given). Empty groups are left out.
    ///
    /// ```
    /// use tch::{nn::VarStore, Device};
    /// use trainbook::models::vit;
    /// use trainbook::train::{Optimizer, ParamGroup};
    /// let vs = VarStore::new(Device::Cpu);
    /// let _net = vit(&vs.root(), "vit_b_32", 10, 64)?;
    /// let mut opt = Optimizer::adamw(&vs, 1e-3);
    /// let keys = [("class_token", 0.0), ("position_embedding", 0.0)];
    /// for g in ParamGroup::torchvision_custom_weight_decay(&vs, Some(0.0), &keys) {
    ///     opt = opt.param_group(g)?;
    /// }
    /// // torchvision's ViT calls its embedding `pos_embedding`, which the key does not name.
    /// assert_eq!(opt.group_labels(), ["default", "norm", "class_token"]);
    /// # Ok::<(), trainbook::Error>(())
    /// ```
    pub fn torchvision_custom_weight_decay(
        vs: &tch::nn::VarStore,
        norm: Option<f64>,
        custom: &[(&str, f64)],
    ) -> Vec<ParamGroup> {
        let variables = vs.variables();
        let norm_modules: std::collections::HashSet<String> = variables
            .iter()
            .filter(|(name, t)| t.dim() == 1 && (name == &"weight" || name.ends_with(".weight")))
            .map(|(name, _)| name.strip_suffix("weight").unwrap_or("").to_string())
            .collect();
        let in_norm = move |name: &str| {
            let module = name.rsplit_once('.').map_or("", |(m, _)| m);
            let prefix = if module.is_empty() { String::new() } else { format!("{module}.") };
            norm_modules.contains(&prefix)
        };
        // The custom key that takes a parameter: the first that names it.
        let keys: Vec<String> = custom.iter().map(|(k, _)| k.to_string()).collect();
        let key_of = move |name: &str| -> Option<usize> {
            let leaf = name.rsplit_once('.').map_or(name, |(_, leaf)| leaf);
            keys.iter().position(|k| if k.contains('.') { k == name } else { k == leaf })
        };
        let selects_any = |f: &dyn Fn(&str) -> bool| {
            variables.iter().any(|(name, t)| f(name) && t.requires_grad())
        };
        let mut groups = Vec::new();
        if let Some(wd) = norm {
            let key_of = key_of.clone();
            let select = move |name: &str| in_norm(name) && key_of(name).is_none();
            if selects_any(&select) {
                groups.push(ParamGroup::new("norm", move |name, _| select(name)).weight_decay(wd));
            }
        }
        for (i, (key, wd)) in custom.iter().enumerate() {
            let key_of = key_of.clone();
            let select = move |name: &str| key_of(name) == Some(i);
            if selects_any(&select) {
                let group = ParamGroup::new(*key, move |name, _| select(name));
                groups.push(group.weight_decay(*wd));
            }
        }
        groups
    }

    /// The group's learning rate (torch's group `lr`); otherwise the optimizer's.
    pub fn lr(mut self, lr: f64) -> Self {
        self.lr = Some(lr);
        self
    }

    /// The group's weight decay (torch's group `weight_decay`); otherwise the optimizer's
    /// [`OptimizerKind`](super::OptimizerKind)'s.
    pub fn weight_decay(mut self, weight_decay: f64) -> Self {
        self.weight_decay = Some(weight_decay);
        self
    }

    /// The group's name.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The learning rate it sets, if any.
    pub fn lr_override(&self) -> Option<f64> {
        self.lr
    }

    /// The weight decay it sets, if any.
    pub fn weight_decay_override(&self) -> Option<f64> {
        self.weight_decay
    }

    /// Whether the parameter `name` belongs to the group.
    pub fn selects(&self, name: &str, t: &Tensor) -> bool {
        (self.select)(name, t)
    }
}

/// Param groups: torch.optim's `param_groups`, each with its own learning rate and weight
/// decay. Group 0 is the default group (the optimizer's rate and the kind's weight decay);
/// [`param_group`](Self::param_group) adds the others.
impl Optimizer {
    /// Moves the parameters that `group` selects, among those still in the default group, into
    /// a new group with its rate and weight decay (torch's `add_param_group`, or a list of
    /// dicts given to the constructor). A parameter taken by an earlier group stays there.
    /// Errors ([`Error::InvalidArgument`] naming the group): it selects none of them, its
    /// label is taken, or a step was already taken (torch fixes the groups before training).
    ///
    /// ```
    /// # fn main() -> trainbook::Result<()> {
    /// use tch::nn::VarStore;
    /// use tch::Device;
    /// use trainbook::models::resnet18_classifier;
    /// use trainbook::train::{Optimizer, OptimizerKind, ParamGroup};
    /// let vs = VarStore::new(Device::Cpu);
    /// let _net = resnet18_classifier(&vs.root(), 3);
    /// // torch: SGD([{"params": head, "lr": 0.1}, {"params": norms_and_biases, "weight_decay": 0},
    /// //             {"params": rest}], lr=0.01, momentum=0.9, weight_decay=5e-4)
    /// let kind =
    ///     OptimizerKind::Sgd { momentum: 0.9, dampening: 0.0, nesterov: false, weight_decay: 5e-4 };
    /// let opt = Optimizer::new(&vs, kind, 0.01)
    ///     .param_group(ParamGroup::prefix("fc.").lr(0.1))?
    ///     .param_group(ParamGroup::norm_and_bias())?;
    /// assert_eq!(opt.group_lrs(), [0.01, 0.1, 0.01]);
    /// // The course's head: fc.0 (Linear), ReLU, fc.2 (Linear).
    /// assert_eq!(opt.group_parameter_names(1), ["fc.0.weight", "fc.0.bias", "fc.2.weight", "fc.2.bias"]);
    /// # Ok(()) }
    /// ```
    pub fn param_group(mut self, group: ParamGroup) -> Result<Optimizer> {
        let bad =
            |why: &str| Err(Error::InvalidArgument(format!("param group {}: {why}", group.label)));
        if self.groups.iter().any(|g| g.label == group.label) {
            return bad("a group of this label exists already");
        }
        if !self.state.is_empty() {
            return bad("the optimizer has stepped already; add groups before training");
        }
        if let Some(lr) = group.lr.filter(|lr| !(lr.is_finite() && *lr >= 0.0)) {
            return bad(&format!("lr must be finite and >= 0, got {lr}"));
        }
        if let Some(wd) = group.weight_decay.filter(|wd| !(wd.is_finite() && *wd >= 0.0)) {
            return bad(&format!("weight_decay must be finite and >= 0, got {wd}"));
        }
        let index = self.groups.len();
        let mut taken = 0;
        for ((name, p), g) in self.params.iter().zip(self.group_of.iter_mut()) {
            if *g == 0 && group.selects(name, p) {
                *g = index;
                taken += 1;
            }
        }
        if taken == 0 {
            return bad("selects none of the parameters left in the default group");
        }
        self.groups.push(GroupSettings {
            label: group.label.clone(),
            lr: group.lr.unwrap_or(self.groups[0].lr),
            weight_decay: group.weight_decay,
            momentum: None,
        });
        Ok(self)
    }

    /// The groups' labels, the default group (`"default"`) first.
    pub fn group_labels(&self) -> Vec<&str> {
        self.groups.iter().map(|g| g.label.as_str()).collect()
    }

    /// Each group's current learning rate (`[g["lr"] for g in optimizer.param_groups]`).
    pub fn group_lrs(&self) -> Vec<f64> {
        self.groups.iter().map(|g| g.lr).collect()
    }

    /// Sets each group's rate, in the order of [`group_lrs`](Self::group_lrs) (what a torch
    /// scheduler writes into every group). Errors ([`Error::InvalidArgument`]) when the count
    /// differs from the number of groups; nothing changes then.
    pub fn set_group_lrs(&mut self, lrs: &[f64]) -> Result<()> {
        self.check_one_per_group(lrs.len(), "learning rates")?;
        for (g, lr) in self.groups.iter_mut().zip(lrs) {
            g.lr = *lr;
        }
        Ok(())
    }

    /// [`Error::InvalidArgument`] unless `count` values (`what`: "learning rates") are one per
    /// group.
    pub(super) fn check_one_per_group(&self, count: usize, what: &str) -> Result<()> {
        if count == self.groups.len() {
            return Ok(());
        }
        Err(Error::InvalidArgument(format!(
            "{count} {what} for {} param groups ({})",
            self.groups.len(),
            self.group_labels().join(", ")
        )))
    }

    /// The names of the parameters of group `index` (0: the default group), in creation order.
    pub fn group_parameter_names(&self, index: usize) -> Vec<&str> {
        let names = self.params.iter().zip(&self.group_of);
        names.filter(|(_, g)| **g == index).map(|((n, _), _)| n.as_str()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind};

    #[test]
    fn the_rules_select_what_they_say() {
        let matrix = Tensor::zeros([3, 2], (Kind::Float, Device::Cpu));
        let vector = Tensor::zeros([3], (Kind::Float, Device::Cpu));
        let nd = ParamGroup::norm_and_bias();
        assert!(nd.selects("bn1.weight", &vector) && nd.selects("fc.bias", &vector));
        assert!(!nd.selects("fc.weight", &matrix) && nd.selects("odd.bias", &matrix));
        let head = ParamGroup::prefix("fc.").weight_decay(1e-4);
        assert!(head.selects("fc.weight", &matrix) && !head.selects("fc1.weight", &matrix));
        assert_eq!((head.lr_override(), head.weight_decay_override()), (None, Some(1e-4)));
        assert!(format!("{head:?}").contains("fc."));
    }

    fn model() -> tch::nn::VarStore {
        let vs = tch::nn::VarStore::new(Device::Cpu);
        let _ = (vs.root() / "fc").zeros("weight", &[2, 3]);
        let _ = (vs.root() / "fc").zeros("bias", &[2]);
        let _ = (vs.root() / "conv").zeros("weight", &[2, 3]);
        vs
    }

    fn err(r: Result<Optimizer>) -> String {
        r.err().expect("should be refused").to_string()
    }

    #[test]
    fn bad_groups_are_refused_by_name() {
        let vs = model();
        let opt = || Optimizer::adamw(&vs, 1e-3);
        let e = err(opt().param_group(ParamGroup::prefix("head.")));
        assert!(e.contains("head.") && e.contains("none"), "{e}");
        let twice = opt().param_group(ParamGroup::prefix("fc.")).unwrap();
        let e = err(twice.param_group(ParamGroup::prefix("fc.")));
        assert!(e.contains("exists"), "{e}");
        // What an earlier group took is not taken again.
        let taken = opt().param_group(ParamGroup::prefix("fc.")).unwrap();
        let e = err(taken.param_group(ParamGroup::norm_and_bias()));
        assert!(e.contains("no_decay") && e.contains("none"), "{e}");
        let e = err(opt().param_group(ParamGroup::prefix("fc.").lr(f64::NAN)));
        assert!(e.contains("lr"), "{e}");
        let e = err(opt().param_group(ParamGroup::prefix("fc.").weight_decay(-1.0)));
        assert!(e.contains("weight_decay"), "{e}");
        let mut stepped = opt();
        for (_, p) in stepped.parameters() {
            p.sum(tch::Kind::Float).backward();
        }
        stepped.step().unwrap();
        let e = err(stepped.param_group(ParamGroup::prefix("fc.")));
        assert!(e.contains("stepped"), "{e}");
    }

    #[test]
    fn group_rates_round_trip_through_the_state_and_must_fit() {
        let vs = model();
        let mut opt = Optimizer::sgd(&vs, 0.1, 0.9).param_group(ParamGroup::prefix("fc.")).unwrap();
        assert_eq!(opt.group_lrs(), [0.1, 0.1], "a group without a rate takes the optimizer's");
        let e = opt.set_group_lrs(&[0.5]).unwrap_err().to_string();
        assert!(e.contains("1 learning rates for 2 param groups (default, fc.)"), "{e}");
        assert_eq!(opt.group_lrs(), [0.1, 0.1], "a refused change changes nothing");
        opt.set_group_lrs(&[0.5, 0.25]).unwrap();
        let (tensors, meta) = opt.state_dict();
        assert_eq!((meta.lr, meta.group_lrs.clone()), (0.5, vec![0.5, 0.25]));
        let mut again =
            Optimizer::sgd(&vs, 0.1, 0.9).param_group(ParamGroup::prefix("fc.")).unwrap();
        again.load_state_dict(&tensors, &meta).unwrap();
        assert_eq!(again.group_lrs(), [0.5, 0.25]);
        let mut single = Optimizer::sgd(&vs, 0.1, 0.9);
        let e = single.load_state_dict(&tensors, &meta).unwrap_err().to_string();
        assert!(e.contains("param groups"), "{e}");
        // A one-group state sets every group's rate (checkpoints written before groups).
        let (tensors, meta) = single.state_dict();
        assert!(meta.group_lrs.is_empty());
        again.load_state_dict(&tensors, &meta).unwrap();
        assert_eq!(again.group_lrs(), [0.1, 0.1]);
        opt.set_lr(0.3);
        assert_eq!((opt.lr(), opt.group_lrs()), (0.3, vec![0.3, 0.3]));
    }
}
