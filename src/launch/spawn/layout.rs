//! Where `spawn`'s thread ranks run: a device per rank, the group's backend, and whether the
//! ranks take turns on the process's random generators.
use tch::Device;

use crate::dist::Backend;
use crate::{Error, Result};

/// The thread ranks' placement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Layout {
    /// Rank `k`'s device.
    pub devices: Vec<Device>,
    /// NCCL when every rank has a GPU of its own, Gloo otherwise (the CPU, or CUDA tensors of
    /// ranks that share a GPU, which NCCL refuses).
    pub backend: Backend,
    /// Whether the ranks take turns on the generators they share: CPU ranks (one CPU
    /// generator per process) and ranks sharing a GPU (one generator per device). Ranks with
    /// a GPU each draw from their own device's generator and run freely.
    pub turns: bool,
}

/// The layout of `nprocs` thread ranks when `gpus` CUDA devices are visible (0: no CUDA).
/// `wanted`: `None` puts rank `k` on CUDA `k` when there is a GPU per rank (or, with `share`,
/// any GPU), else on the CPU; `Some(Cuda(_))` insists on GPUs; `Some(Cpu)` keeps the CPU.
/// With `share`, rank `k` runs on CUDA `k % gpus` when there are fewer GPUs than ranks.
pub(super) fn layout(
    nprocs: usize,
    wanted: Option<Device>,
    gpus: usize,
    share: bool,
) -> Result<Layout> {
    let enough = gpus >= nprocs || (share && gpus > 0);
    let cuda = match wanted {
        None => enough,
        Some(Device::Cuda(_)) if !enough => {
            let hint = if share { "" } else { " (SpawnOptions::share_gpus lets ranks share them)" };
            return Err(Error::InvalidArgument(format!(
                "spawn({nprocs}) on CUDA needs {nprocs} GPUs, and {gpus} are visible{hint}"
            )));
        }
        Some(Device::Cuda(_)) => true,
        Some(Device::Cpu) => false,
        Some(other) => {
            return Err(Error::InvalidArgument(format!("spawn: unsupported device {other:?}")))
        }
    };
    if !cuda {
        return Ok(Layout {
            devices: vec![Device::Cpu; nprocs],
            backend: Backend::Gloo,
            turns: true,
        });
    }
    let devices: Vec<Device> = (0..nprocs).map(|k| Device::Cuda(k % gpus)).collect();
    let own_gpus = nprocs <= gpus;
    Ok(Layout {
        devices,
        backend: if own_gpus { Backend::Nccl } else { Backend::Gloo },
        turns: !own_gpus,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_go_on_their_own_gpus_or_the_cpu_unless_they_may_share() {
        let cpu = |n| Layout { devices: vec![Device::Cpu; n], backend: Backend::Gloo, turns: true };
        assert_eq!(layout(2, None, 0, false).unwrap(), cpu(2));
        assert_eq!(layout(2, None, 1, false).unwrap(), cpu(2), "too few GPUs: the CPU");
        assert_eq!(layout(2, Some(Device::Cpu), 4, true).unwrap(), cpu(2));
        let own = layout(2, None, 3, false).unwrap();
        assert_eq!(own.devices, [Device::Cuda(0), Device::Cuda(1)]);
        assert_eq!((own.backend, own.turns), (Backend::Nccl, false), "a GPU each: NCCL, no turns");
        assert_eq!(layout(2, Some(Device::Cuda(0)), 2, true).unwrap(), own);

        let shared = layout(3, None, 2, true).unwrap();
        assert_eq!(shared.devices, [Device::Cuda(0), Device::Cuda(1), Device::Cuda(0)]);
        assert_eq!((shared.backend, shared.turns), (Backend::Gloo, true), "shared: Gloo, turns");
        assert_eq!(layout(3, Some(Device::Cuda(0)), 2, true).unwrap(), shared);
        let one_gpu = layout(2, Some(Device::Cuda(0)), 1, true).unwrap();
        assert_eq!(one_gpu.devices, [Device::Cuda(0), Device::Cuda(0)]);

        let err = layout(2, Some(Device::Cuda(0)), 1, false).unwrap_err().to_string();
        assert!(err.contains("needs 2 GPUs, and 1 are visible") && err.contains("share_gpus"));
        assert!(layout(2, Some(Device::Cuda(0)), 0, true).is_err(), "sharing needs a GPU");
        assert!(layout(2, Some(Device::Mps), 0, false).is_err());
    }
}
