//! The run's freezing part (`FitConfig::freeze_backbone_epochs`): the head alone trains for the
//! first N epochs, then the whole network. It says when what trains has changed, so that the
//! run wraps the model for data parallelism again (a reducer hooks only the parameters that
//! require a gradient when it is built, as torch's DDP does).
use tch::nn::VarStore;

use crate::dist::Dist;
use crate::models::freeze_backbone;
use crate::{Error, Result};

/// Freezes (epochs before `n`) or unfreezes (from `n` on) the backbone for `epoch` when that
/// differs from `state` (what the run last set; `None` before the first epoch). Returns whether
/// it changed anything. `n` = 0: the model is left as given.
pub(crate) fn freeze_for_epoch(
    n: u64,
    epoch: u64,
    vs: &VarStore,
    dist: &Dist,
    state: &mut Option<bool>,
) -> Result<bool> {
    let frozen = epoch < n;
    if n == 0 || *state == Some(frozen) {
        return Ok(false);
    }
    freeze_backbone(vs, frozen);
    if !vs.trainable_variables().iter().any(|t| t.requires_grad()) {
        return Err(Error::InvalidArgument(
            "freeze_backbone_epochs: with the backbone frozen nothing trains (the head must be \
             named fc.*, as in torchvision's ResNets)"
                .into(),
        ));
    }
    *state = Some(frozen);
    dist.println(if frozen {
        format!("epochs {}-{n}: the backbone is frozen, only the head (fc.*) trains", epoch + 1)
    } else {
        format!("epoch {}: the backbone is unfrozen, the whole network trains", epoch + 1)
    });
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Device;

    #[test]
    fn the_backbone_is_frozen_before_epoch_n_and_changes_are_reported_once() {
        let vs = VarStore::new(Device::Cpu);
        let body = vs.root().sub("body").zeros("weight", &[2]);
        let head = vs.root().sub("fc").zeros("weight", &[2]);
        let dist = Dist::single(Device::Cpu);
        let mut state = None;
        let mut changes = Vec::new();
        for epoch in [1, 1, 2, 3, 3] {
            changes.push(freeze_for_epoch(3, epoch, &vs, &dist, &mut state).unwrap());
            assert_eq!(body.requires_grad(), epoch >= 3, "epoch {epoch}");
            assert!(head.requires_grad());
        }
        assert_eq!(changes, [true, false, false, true, false]);
        let mut untouched = None;
        assert!(!freeze_for_epoch(0, 0, &vs, &dist, &mut untouched).unwrap());
        assert_eq!(untouched, None);
    }
}
