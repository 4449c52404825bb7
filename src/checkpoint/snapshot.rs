//! What a checkpoint captures of the live run besides the model and optimizer: every rank's
//! random generator states (gathered to rank 0 as hex strings for the manifest, and put back on
//! a resume) and host copies of tensors, taken before a background write so that later updates
//! do not reach it.
use std::path::Path;

use tch::{Device, Tensor};

use super::manifest::{self, Manifest};
use crate::dist::Dist;
use crate::rng::{cpu_rng_state, rng_state, set_cpu_rng_state, set_rng_state};
use crate::{Error, Result};

/// Each rank's CPU generator state and, on GPUs, its CUDA generator's (dropout masks drawn on
/// the device), gathered from all ranks in rank order, as hex.
pub(super) fn gather_rng_states(dist: &Dist) -> Result<(Vec<String>, Vec<String>)> {
    let hex = |ts: Vec<Tensor>| {
        ts.iter()
            .map(|t| Vec::<u8>::try_from(t.to_device(Device::Cpu)).map(|b| manifest::to_hex(&b)))
            .collect::<std::result::Result<Vec<String>, _>>()
    };
    let rng = Tensor::from_slice(&cpu_rng_state()?).to_device(dist.device());
    let states = hex(dist.all_gather(&rng)?)?;
    let device_states = match dist.device() {
        Device::Cuda(_) => hex(dist.all_gather(
            &Tensor::from_slice(&rng_state(dist.device())?).to_device(dist.device()),
        )?)?,
        _ => Vec::new(),
    };
    Ok((states, device_states))
}

/// Puts back this rank's generator states from the manifest `m` of the checkpoint in `dir`
/// (written by as many ranks as now run): the CPU one, and on a GPU the CUDA one when saved.
pub(super) fn restore_rng_states(m: &Manifest, dist: &Dist, dir: &Path) -> Result<()> {
    let state =
        m.rng_states.get(dist.rank()).and_then(|s| manifest::from_hex(s)).ok_or_else(|| {
            Error::Checkpoint(format!(
                "checkpoint {}: no RNG state for rank {}",
                dir.display(),
                dist.rank()
            ))
        })?;
    set_cpu_rng_state(&state)?;
    if let (Some(hex), Device::Cuda(_)) = (m.device_rng_states.get(dist.rank()), dist.device()) {
        let state = manifest::from_hex(hex).ok_or_else(|| {
            Error::Checkpoint(format!(
                "checkpoint {}: damaged CUDA RNG state for rank {}",
                dir.display(),
                dist.rank()
            ))
        })?;
        set_rng_state(dist.device(), &state)?;
    }
    Ok(())
}

/// The tensors on the host: device tensors copied there, CPU tensors copied when `copy` (else
/// taken as they are, for tensors that are copies already).
pub(super) fn on_host(tensors: Vec<(String, Tensor)>, copy: bool) -> Vec<(String, Tensor)> {
    tensors
        .into_iter()
        .map(|(n, t)| {
            let t = if t.device() != Device::Cpu {
                t.to_device(Device::Cpu)
            } else if copy {
                t.copy()
            } else {
                t
            };
            (n, t)
        })
        .collect()
}
