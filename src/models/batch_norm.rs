//! The ResNets' BatchNorm layer, [`BatchNorm2d`]: tch's `batch_norm2d` with torch's
//! initialisation, which a model can turn
//! into torch's `SyncBatchNorm` after it is built (`convert_sync_batchnorm`): every layer of
//! the model shares one [`SyncSlot`], and once a process group is put there, training-mode
//! forward passes normalise with the statistics of all ranks' batches
//! ([`SyncGroup::batch_norm`](crate::dist::SyncGroup::batch_norm)). Evaluation always uses the
//! running statistics, as torch's does.
use std::cell::Cell;
use std::sync::{Arc, RwLock};

use tch::nn::{self, ModuleT};
use tch::Tensor;

use crate::dist::{NormParams, SyncGroup};

thread_local! {
    /// While [`update_bn`](crate::train::update_bn) runs a pass on this thread: the momentum
    /// of every training-mode pass of the layers (torch's cumulative average, `momentum=None`:
    /// `1 / k` at the k-th batch).
    static FORCED_MOMENTUM: Cell<Option<f64>> = const { Cell::new(None) };
}

/// Runs `f` with every [`BatchNorm2d`]'s training passes on this thread using `momentum`
/// (put back afterwards, also when `f` panics).
pub(crate) fn with_momentum<R>(momentum: f64, f: impl FnOnce() -> R) -> R {
    struct Reset(Option<f64>);
    impl Drop for Reset {
        fn drop(&mut self) {
            FORCED_MOMENTUM.with(|m| m.set(self.0));
        }
    }
    let _reset = Reset(FORCED_MOMENTUM.with(|m| m.replace(Some(momentum))));
    f()
}

/// Where the BatchNorm layers of one model find the group they synchronise over (none: each
/// rank's own batch, plain BatchNorm). Clones share the slot.
#[derive(Clone, Default)]
pub struct SyncSlot(Arc<RwLock<Option<Arc<SyncGroup>>>>);

impl std::fmt::Debug for SyncSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let size = self.group().map(|g| g.size());
        f.debug_tuple("SyncSlot").field(&size).finish()
    }
}

impl SyncSlot {
    /// Synchronises the layers over `group` from the next forward pass on (`None`: stop).
    pub fn set(&self, group: Option<SyncGroup>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = group.map(Arc::new);
    }

    /// The group, if the layers synchronise.
    pub fn group(&self) -> Option<Arc<SyncGroup>> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// `torch.nn.BatchNorm2d(c)` with torch's momentum 0.1 and eps 1e-5 (or others:
/// [`with`](Self::with)), initialised as torch's (weight 1, bias 0; tch's `batch_norm2d` draws
/// the weight uniform in [0, 1) instead); a `SyncBatchNorm` while its [`SyncSlot`] holds a
/// group.
#[derive(Debug)]
pub struct BatchNorm2d {
    bn: nn::BatchNorm,
    sync: SyncSlot,
    eps: f64,
    momentum: f64,
}

/// torch's BatchNorm defaults (tch's `BatchNormConfig::default()` has the same).
const MOMENTUM: f64 = 0.1;
const EPS: f64 = 1e-5;

impl BatchNorm2d {
    /// The layer under `p` with `c` channels, synchronising through `sync`.
    pub fn new(p: nn::Path, c: i64, sync: &SyncSlot) -> BatchNorm2d {
        BatchNorm2d::with(p, c, sync, (EPS, MOMENTUM))
    }

    /// `torch.nn.BatchNorm2d(c, eps=eps, momentum=momentum)` (MobileNetV3's: 0.001, 0.01).
    pub fn with(p: nn::Path, c: i64, sync: &SyncSlot, (eps, momentum): (f64, f64)) -> BatchNorm2d {
        let config = nn::BatchNormConfig {
            momentum,
            eps,
            ws_init: nn::Init::Const(1.0),
            bs_init: nn::Init::Const(0.0),
            ..Default::default()
        };
        BatchNorm2d { bn: nn::batch_norm2d(p, c, config), sync: sync.clone(), eps, momentum }
    }
}

impl ModuleT for BatchNorm2d {
    /// # Panics
    /// In a synchronised training pass, when the all-reduce fails (a rank gone, the group's
    /// timeout): the message names SyncBatchNorm and the cause, as tch's layers panic on
    /// libtorch's errors.
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let forced = FORCED_MOMENTUM.with(Cell::get).filter(|_| train);
        match self.sync.group().filter(|_| train) {
            None if forced.is_none() => self.bn.forward_t(xs, train),
            // tch's layer with another momentum: the same call (cuDNN allowed, as its default).
            None => Tensor::batch_norm(
                xs,
                self.bn.ws.as_ref(),
                self.bn.bs.as_ref(),
                Some(&self.bn.running_mean),
                Some(&self.bn.running_var),
                true,
                forced.unwrap_or(self.momentum),
                self.eps,
                true,
            ),
            Some(group) => {
                let params = NormParams {
                    affine: self.bn.ws.as_ref().zip(self.bn.bs.as_ref()),
                    running: Some((&self.bn.running_mean, &self.bn.running_var)),
                    momentum: forced.unwrap_or(self.momentum),
                    eps: self.eps,
                };
                group.batch_norm(xs, &params).unwrap_or_else(|e| panic!("{e}"))
            }
        }
    }
}
