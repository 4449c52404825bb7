//! An optimizer's state as named tensors and [`OptimizerMeta`]: exported for checkpoints and
//! restored from them (SGD's momentum buffers, Adam's moments, an [`UpdateRule`]'s own tensors
//! under their names: [`UpdateRule`](crate::train::UpdateRule)), so a resumed run continues
//! exactly.
use std::collections::BTreeMap;

use tch::Tensor;

use super::state::{OptimizerMeta, ParamState};
use super::Optimizer;
use crate::{Error, Result};

impl Optimizer {
    /// The state as named tensors (`<param>.exp_avg`, `<param>.exp_avg_sq`,
    /// `<param>.momentum_buffer`; a rule's own as `<param>.<its name>`) plus the step counts in
    /// [`OptimizerMeta`].
    pub fn state_dict(&self) -> (Vec<(String, Tensor)>, OptimizerMeta) {
        let mut tensors = Vec::new();
        let mut steps = BTreeMap::new();
        for (name, st) in &self.state {
            steps.insert(name.clone(), st.current_step());
            for (suffix, t) in [
                ("exp_avg", &st.exp_avg),
                ("exp_avg_sq", &st.exp_avg_sq),
                ("momentum_buffer", &st.momentum_buffer),
            ] {
                if let Some(t) = t {
                    tensors.push((format!("{name}.{suffix}"), t.copy()));
                }
            }
            for (suffix, t) in st.rule.tensors() {
                tensors.push((format!("{name}.{suffix}"), t.copy()));
            }
        }
        let group_lrs = if self.groups.len() > 1 { self.group_lrs() } else { Vec::new() };
        let rule = self.rule.as_ref().map(|r| r.name().to_string());
        let meta = OptimizerMeta { kind: Some(self.kind), lr: self.lr(), group_lrs, steps, rule };
        (tensors, meta)
    }

    /// Restores what [`state_dict`](Self::state_dict) exported (copying the tensors); errors
    /// name unknown parameters and shape mismatches.
    pub fn load_state_dict(
        &mut self,
        tensors: &[(String, Tensor)],
        meta: &OptimizerMeta,
    ) -> Result<()> {
        self.load_state_dict_owned(
            tensors.iter().map(|(n, t)| (n.clone(), t.copy())).collect(),
            meta,
        )
    }

    /// Like [`load_state_dict`](Self::load_state_dict), taking ownership of the tensors
    /// (no copy when they are already on the parameters' device).
    pub fn load_state_dict_owned(
        &mut self,
        tensors: Vec<(String, Tensor)>,
        meta: &OptimizerMeta,
    ) -> Result<()> {
        if let Some(kind) = meta.kind {
            if std::mem::discriminant(&kind) != std::mem::discriminant(&self.kind) {
                return Err(Error::InvalidArgument(format!(
                    "optimizer state is for {kind:?}, this optimizer is {:?}",
                    self.kind
                )));
            }
        }
        let ours = self.rule.as_ref().map(|r| r.name().to_string());
        if meta.kind.is_some() && meta.rule != ours {
            return Err(Error::InvalidArgument(format!(
                "optimizer state is for the rule {:?}, this optimizer's is {ours:?}",
                meta.rule
            )));
        }
        let mut state: BTreeMap<String, ParamState> = BTreeMap::new();
        for (name, step) in &meta.steps {
            if !self.params.iter().any(|(n, _)| n == name) {
                return Err(Error::InvalidArgument(format!(
                    "optimizer state names unknown parameter {name}"
                )));
            }
            state.insert(name.clone(), ParamState { step: *step, ..Default::default() });
        }
        for (key, t) in &tensors {
            let (name, suffix) = key
                .rsplit_once('.')
                .ok_or_else(|| Error::InvalidArgument(format!("bad optimizer key {key}")))?;
            let (_, p) = self.params.iter().find(|(n, _)| n == name).ok_or_else(|| {
                Error::InvalidArgument(format!("optimizer state names unknown parameter {name}"))
            })?;
            // A rule may keep scalars (NAdam's mu_product, on the CPU as torch keeps it).
            let scalar_of_rule = self.rule.is_some() && t.dim() == 0;
            if t.size() != p.size() && !scalar_of_rule {
                return Err(Error::InvalidArgument(format!(
                    "optimizer state {key}: shape {:?}, parameter has {:?}",
                    t.size(),
                    p.size()
                )));
            }
            let st = state.entry(name.to_string()).or_default();
            let on_device = if scalar_of_rule { t.copy() } else { t.to_device(p.device()) };
            if self.rule.is_some() {
                st.rule.insert(suffix.to_string(), on_device);
                continue;
            }
            let value = Some(on_device);
            match suffix {
                "exp_avg" => st.exp_avg = value,
                "exp_avg_sq" => st.exp_avg_sq = value,
                "momentum_buffer" => st.momentum_buffer = value,
                other => {
                    return Err(Error::InvalidArgument(format!(
                        "unknown optimizer state {other} in {key}"
                    )))
                }
            }
        }
        match meta.group_lrs.len() {
            0 => self.set_lr(meta.lr),
            _ => self.set_group_lrs(&meta.group_lrs)?,
        }
        self.state = state;
        Ok(())
    }
}
