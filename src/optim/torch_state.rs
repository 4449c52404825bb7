//! An optimizer's state in PyTorch's own layout (`optimizer.state_dict()`: `state` by parameter
//! index, `param_groups` with their hyper-parameters), so that a run checkpointed by PyTorch
//! (the course's `optimizer_state_dict`) continues in trainbook and the reverse. Parameter
//! indices count through the groups in order, as torch.optim numbers them; the layouts match
//! when both optimizers have the same groups with the same parameters in the same order, which
//! the shapes confirm.
use std::collections::BTreeMap;

use tch::Tensor;

use super::state::ParamState;
use super::{Optimizer, OptimizerKind};
use crate::torch_file::TorchValue;
use crate::{Error, Result};

fn bad(message: String) -> Error {
    Error::InvalidArgument(format!("PyTorch optimizer state: {message}"))
}

impl Optimizer {
    /// The parameter names in torch.optim's index order: group by group, each in creation order.
    fn torch_index_names(&self) -> Vec<Vec<String>> {
        (0..self.groups.len())
            .map(|g| self.group_parameter_names(g).into_iter().map(String::from).collect())
            .collect()
    }

    /// `optimizer.state_dict()` as torch.optim builds it, for `torch.save` (tensors copied to
    /// the CPU): per parameter index `step`, `exp_avg`, `exp_avg_sq` (Adam, AdamW) or
    /// `momentum_buffer` (SGD), and each group's hyper-parameters under torch's names, so that
    /// PyTorch's `optimizer.load_state_dict(torch.load(path)["optimizer_state_dict"])` takes it.
    pub fn torch_state_dict(&self) -> TorchValue {
        let cpu = |t: &Tensor| TorchValue::Tensor(t.to_device(tch::Device::Cpu).copy());
        let mut state = Vec::new();
        let mut groups = Vec::new();
        let mut index = 0i64;
        for (g, names) in self.torch_index_names().iter().enumerate() {
            let mut params = Vec::new();
            for name in names {
                if let Some(st) = self.state.get(name) {
                    let mut entries: Vec<(TorchValue, TorchValue)> = Vec::new();
                    match self.kind {
                        OptimizerKind::Sgd { .. } => entries.push((
                            "momentum_buffer".into(),
                            st.momentum_buffer.as_ref().map_or(TorchValue::None, cpu),
                        )),
                        _ => {
                            let step = Tensor::from(st.current_step() as f32);
                            entries.push(("step".into(), step.into()));
                            for (key, t) in
                                [("exp_avg", &st.exp_avg), ("exp_avg_sq", &st.exp_avg_sq)]
                            {
                                if let Some(t) = t {
                                    entries.push((key.into(), cpu(t)));
                                }
                            }
                            // A rule's own tensors under its names (torch's, for RMSprop,
                            // NAdam and RAdam).
                            for (key, t) in st.rule.tensors() {
                                entries.push((key.as_str().into(), cpu(t)));
                            }
                        }
                    }
                    state.push((TorchValue::Int(index), TorchValue::Dict(entries)));
                }
                params.push(TorchValue::Int(index));
                index += 1;
            }
            let (kind, lr) = self.groups[g].rule(self.kind);
            groups.push(TorchValue::Dict(group_entries(kind, lr, params)));
        }
        TorchValue::Dict(vec![
            ("state".into(), TorchValue::Dict(state)),
            ("param_groups".into(), TorchValue::List(groups)),
        ])
    }

    /// `optimizer.load_state_dict(state_dict)` for a state dict in PyTorch's layout (from
    /// [`torch_file::load`](crate::torch_file::load)): the moments, momentum buffers and step
    /// counts by parameter index, and, as torch does, each group's learning rate and
    /// hyper-parameters from the file. Errors ([`Error::InvalidArgument`], nothing changed):
    /// another update rule (SGD vs Adam vs AdamW), `amsgrad` or `maximize` (not implemented
    /// here), other groups or group sizes, a tensor whose shape is not its parameter's.
    pub fn load_torch_state_dict(&mut self, sd: &TorchValue) -> Result<()> {
        if let Some(rule) = &self.rule {
            return Err(bad(format!(
                "PyTorch files hold SGD, Adam and AdamW states here; this optimizer's rule is {}",
                rule.name()
            )));
        }
        let groups = match sd.get("param_groups") {
            Some(TorchValue::List(g)) => g,
            _ => return Err(bad("no param_groups list".into())),
        };
        let names = self.torch_index_names();
        let sizes: Vec<usize> = names.iter().map(Vec::len).collect();
        let theirs: Vec<usize> = groups
            .iter()
            .map(|g| match g.get("params") {
                Some(TorchValue::List(p)) => p.len(),
                _ => usize::MAX,
            })
            .collect();
        if theirs != sizes {
            return Err(bad(format!(
                "its param groups hold {theirs:?} parameters, this optimizer's {sizes:?} ({})",
                self.group_labels().join(", ")
            )));
        }
        let mut kinds = Vec::new();
        let mut lrs = Vec::new();
        for (g, group) in groups.iter().enumerate() {
            let (kind, lr) =
                kind_of(group, self.kind).map_err(|m| bad(format!("param group {g}: {m}")))?;
            kinds.push(kind);
            lrs.push(lr);
        }
        // Index -> parameter name, from the file's own `params` lists.
        let mut by_index = BTreeMap::new();
        for (group, names) in groups.iter().zip(&names) {
            if let Some(TorchValue::List(ids)) = group.get("params") {
                for (id, name) in ids.iter().zip(names) {
                    let id =
                        id.as_i64().ok_or_else(|| bad("a parameter id is not an int".into()))?;
                    by_index.insert(id, name.clone());
                }
            }
        }
        let mut state = BTreeMap::new();
        let entries = match sd.get("state") {
            Some(TorchValue::Dict(e)) => e.as_slice(),
            _ => return Err(bad("no state dict".into())),
        };
        for (id, st) in entries {
            let id = id.as_i64().ok_or_else(|| bad("a state key is not an int".into()))?;
            let name = by_index
                .get(&id)
                .ok_or_else(|| bad(format!("state for parameter {id}, which no group lists")))?;
            let (_, p) = self.params.iter().find(|(n, _)| n == name).expect("a listed parameter");
            let mut ps = ParamState::default();
            for key in st.keys() {
                let value = st.get(&key).expect("a listed key");
                if key == "step" {
                    let step =
                        value.as_tensor().map(|t| t.double_value(&[])).or_else(|| value.as_f64());
                    ps.step = step
                        .ok_or_else(|| bad(format!("{name}: step is a {}", value.kind_name())))?
                        as u64;
                    continue;
                }
                let slot = match key.as_str() {
                    "exp_avg" => &mut ps.exp_avg,
                    "exp_avg_sq" => &mut ps.exp_avg_sq,
                    "momentum_buffer" => &mut ps.momentum_buffer,
                    other => {
                        return Err(bad(format!(
                            "{name}: state {other:?} is not one trainbook keeps"
                        )))
                    }
                };
                match value {
                    TorchValue::None => {}
                    TorchValue::Tensor(t) if t.size() == p.size() => {
                        *slot = Some(t.to_device(p.device()).to_kind(p.kind()))
                    }
                    TorchValue::Tensor(t) => {
                        return Err(bad(format!(
                            "{name}.{key}: shape {:?}, the parameter's {:?}",
                            t.size(),
                            p.size()
                        )))
                    }
                    other => return Err(bad(format!("{name}.{key} is a {}", other.kind_name()))),
                }
            }
            state.insert(name.clone(), ps);
        }
        // Group 0's rule becomes the optimizer's; other groups keep a weight decay and a
        // momentum of their own (a schedule's per-group momentum).
        self.kind = kinds[0];
        for (settings, (kind, lr)) in self.groups.iter_mut().zip(kinds.iter().zip(lrs)) {
            settings.lr = lr;
            let wd = weight_decay(*kind);
            settings.weight_decay = (wd != weight_decay(kinds[0])).then_some(wd);
            settings.momentum = kind.momentum().filter(|m| Some(*m) != kinds[0].momentum());
        }
        self.state = state;
        Ok(())
    }
}

fn weight_decay(kind: OptimizerKind) -> f64 {
    match kind {
        OptimizerKind::Sgd { weight_decay, .. }
        | OptimizerKind::Adam { weight_decay, .. }
        | OptimizerKind::AdamW { weight_decay, .. }
        | OptimizerKind::Rule { weight_decay } => weight_decay,
    }
}

/// A param group's entries as torch.optim writes them for `kind`.
fn group_entries(
    kind: OptimizerKind,
    lr: f64,
    params: Vec<TorchValue>,
) -> Vec<(TorchValue, TorchValue)> {
    let mut e: Vec<(TorchValue, TorchValue)> = vec![("lr".into(), lr.into())];
    match kind {
        OptimizerKind::Sgd { momentum, dampening, nesterov, weight_decay } => {
            e.push(("momentum".into(), momentum.into()));
            e.push(("dampening".into(), dampening.into()));
            e.push(("weight_decay".into(), weight_decay.into()));
            e.push(("nesterov".into(), nesterov.into()));
        }
        OptimizerKind::Adam { beta1, beta2, eps, weight_decay }
        | OptimizerKind::AdamW { beta1, beta2, eps, weight_decay } => {
            e.push(("betas".into(), TorchValue::Tuple(vec![beta1.into(), beta2.into()])));
            e.push(("eps".into(), eps.into()));
            e.push(("weight_decay".into(), weight_decay.into()));
            e.push(("amsgrad".into(), false.into()));
        }
        // A rule's own hyper-parameters are not known here: its rate and weight decay.
        OptimizerKind::Rule { weight_decay } => {
            e.push(("weight_decay".into(), weight_decay.into()));
        }
    }
    e.push(("maximize".into(), false.into()));
    e.push(("foreach".into(), TorchValue::None));
    if !matches!(kind, OptimizerKind::Sgd { .. }) {
        e.push(("capturable".into(), false.into()));
    }
    e.push(("differentiable".into(), false.into()));
    e.push(("fused".into(), TorchValue::None));
    if !matches!(kind, OptimizerKind::Sgd { .. }) {
        e.push((
            "decoupled_weight_decay".into(),
            matches!(kind, OptimizerKind::AdamW { .. }).into(),
        ));
    }
    e.push(("params".into(), TorchValue::List(params)));
    e
}

/// The update rule and rate a torch param group describes; `ours` decides Adam vs AdamW for
/// files from before torch wrote `decoupled_weight_decay`.
fn kind_of(
    group: &TorchValue,
    ours: OptimizerKind,
) -> std::result::Result<(OptimizerKind, f64), String> {
    let num = |k: &str| group.get(k).and_then(TorchValue::as_f64).ok_or(format!("no number {k:?}"));
    let flag = |k: &str| matches!(group.get(k), Some(TorchValue::Bool(true)));
    for unsupported in ["amsgrad", "maximize"] {
        if flag(unsupported) {
            return Err(format!("{unsupported}=True is not implemented in trainbook"));
        }
    }
    let lr = num("lr")?;
    let weight_decay = num("weight_decay")?;
    let kind = if group.get("momentum").is_some() {
        OptimizerKind::Sgd {
            momentum: num("momentum")?,
            dampening: num("dampening")?,
            nesterov: flag("nesterov"),
            weight_decay,
        }
    } else if let Some(TorchValue::Tuple(b) | TorchValue::List(b)) = group.get("betas") {
        let beta = |i: usize| {
            b.get(i)
                .and_then(TorchValue::as_f64)
                .ok_or("betas is not a pair of numbers".to_string())
        };
        let (beta1, beta2, eps) = (beta(0)?, beta(1)?, num("eps")?);
        let decoupled = match group.get("decoupled_weight_decay") {
            Some(TorchValue::Bool(d)) => *d,
            _ => matches!(ours, OptimizerKind::AdamW { .. }),
        };
        if decoupled {
            OptimizerKind::AdamW { beta1, beta2, eps, weight_decay }
        } else {
            OptimizerKind::Adam { beta1, beta2, eps, weight_decay }
        }
    } else {
        return Err("neither SGD's momentum nor Adam's betas: another optimizer".into());
    };
    if std::mem::discriminant(&kind) != std::mem::discriminant(&ours) {
        return Err(format!("the file's optimizer is {kind:?}, this one is {ours:?}"));
    }
    Ok((kind, lr))
}

#[cfg(test)]
mod tests {
    use tch::nn::VarStore;
    use tch::Device;

    use crate::train::{Optimizer, ParamGroup};

    #[test]
    fn each_groups_momentum_goes_out_and_comes_back_in_torch_s_layout() {
        let vs = VarStore::new(Device::Cpu);
        let _ = vs.root().zeros("w", &[2, 2]);
        let _ = vs.root().zeros("b", &[2]);
        for make in [
            |vs: &VarStore| Optimizer::sgd(vs, 0.1, 0.9),
            |vs: &VarStore| Optimizer::adamw(vs, 0.1),
        ] {
            let grouped = |vs: &VarStore| make(vs).param_group(ParamGroup::prefix("b")).unwrap();
            let mut opt = grouped(&vs);
            opt.set_group_momentums(&[0.85, 0.95]).unwrap();
            let mut back = grouped(&vs);
            back.load_torch_state_dict(&opt.torch_state_dict()).unwrap();
            assert_eq!(back.group_momentums(), [Some(0.85), Some(0.95)], "{:?}", opt.kind());
        }
    }
}
