//! SyncBatchNorm's collective: [`SyncGroup`], a process group's reference that the BatchNorm
//! layers of a model keep, and [`SyncGroup::batch_norm`], training-mode batch normalisation
//! with the statistics of the whole group's batch (`csrc/sync_bn_shim.cpp`, an autograd
//! function whose forward and backward all-reduce per-channel sums, as torch's SyncBatchNorm
//! does). The layer that uses it is [`BatchNorm2d`](crate::models::BatchNorm2d).
use std::os::raw::c_void;

use tch::Tensor;

use super::{Dist, ProcessGroup};
use crate::shim::sync_bn::{
    tb_sync_batch_norm, tb_sync_group_free, tb_sync_group_new, TbSyncGroup,
};
use crate::{Error, Result};

/// The process group whose ranks share their BatchNorm statistics (it stays valid after the
/// [`Dist`] it came from is gone).
pub struct SyncGroup {
    raw: *mut TbSyncGroup,
    size: usize,
}

// SAFETY: the handle holds a reference-counted c10d backend, whose collectives may be called
// from any thread; it is freed once, by Drop.
unsafe impl Send for SyncGroup {}
unsafe impl Sync for SyncGroup {}

/// What [`SyncGroup::batch_norm`] normalises with: the layer's affine parameters and running
/// statistics (any may be absent), torch's `momentum` and `eps`.
pub struct NormParams<'a> {
    /// Per-channel scale (`weight`), with `bias`; `None` without affine parameters.
    pub affine: Option<(&'a Tensor, &'a Tensor)>,
    /// `running_mean` and `running_var`, updated in place; `None` when not tracked.
    pub running: Option<(&'a Tensor, &'a Tensor)>,
    /// Weight of the new statistics in the running ones (torch's default 0.1).
    pub momentum: f64,
    /// Added to the variance (torch's default 1e-5).
    pub eps: f64,
}

impl SyncGroup {
    /// The group of `pg`.
    pub fn new(pg: &ProcessGroup) -> Result<SyncGroup> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: `pg.raw()` is a live process group; on success `raw` is an owned handle.
        crate::shim::check("SyncBatchNorm group", unsafe {
            tb_sync_group_new(pg.raw(), &mut raw)
        })?;
        Ok(SyncGroup { raw, size: pg.size() })
    }

    /// The group of `dist`'s process group; `None` for a world of one (nothing to share).
    pub fn of(dist: &Dist) -> Result<Option<SyncGroup>> {
        match dist.process_group() {
            Some(pg) if pg.size() > 1 => SyncGroup::new(pg).map(Some),
            _ => Ok(None),
        }
    }

    /// Ranks in the group.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Training-mode batch normalisation of `x` (`[N, C, ...]`) with the mean and variance of
    /// the whole group's batch, differentiable: its backward all-reduces too, so the input's
    /// gradient is BatchNorm's over the concatenated batch (the weight's and bias's are this
    /// rank's share; DDP sums them). Every rank must call it in the same order. Errors: a
    /// failed collective ([`Error::Dist`]: a rank gone, a timeout), a bad shape.
    pub fn batch_norm(&self, x: &Tensor, p: &NormParams) -> Result<Tensor> {
        let ptr = |t: Option<&Tensor>| t.map_or(std::ptr::null(), |t| t.as_ptr() as *const c_void);
        let mut out = std::ptr::null_mut();
        // SAFETY: every tensor pointer is live for the call (or null where the C API allows);
        // on success `out` is a new at::Tensor that the returned Tensor owns.
        let err = crate::rng::blocking(|| unsafe {
            tb_sync_batch_norm(
                self.raw,
                x.as_ptr() as *const c_void,
                ptr(p.affine.map(|a| a.0)),
                ptr(p.affine.map(|a| a.1)),
                ptr(p.running.map(|r| r.0)),
                ptr(p.running.map(|r| r.1)),
                p.momentum,
                p.eps,
                &mut out,
            )
        });
        crate::shim::check("SyncBatchNorm all-reduce (forward)", err)?;
        if out.is_null() {
            return Err(Error::Dist {
                op: "SyncBatchNorm".into(),
                message: "no output tensor".into(),
            });
        }
        // SAFETY: `out` is an owned at::Tensor* allocated by the shim.
        Ok(unsafe { Tensor::from_ptr(out as *mut torch_sys::C_tensor) })
    }
}

impl Drop for SyncGroup {
    fn drop(&mut self) {
        // SAFETY: `raw` came from tb_sync_group_new and is freed only here.
        unsafe { tb_sync_group_free(self.raw) }
    }
}
