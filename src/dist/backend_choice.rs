//! Which backend a job's group uses when the program does not say: NCCL when every rank has a
//! GPU of its own, Gloo (with CUDA tensors, staged through the host) when ranks share a GPU,
//! which NCCL refuses ("Duplicate GPU detected"). The ranks tell each other their GPUs' UUIDs
//! through the launch store, so all of them take the same decision, whatever
//! `CUDA_VISIBLE_DEVICES` each one sees (Slurm's `--gpus-per-task` shows every task its GPU as
//! device 0).
use tch::Device;

use super::{Backend, LaunchEnv, Store};
use crate::Result;

/// The backend for `rank`'s group on `device`: Gloo on the CPU or in a build without NCCL; on
/// CUDA otherwise, the ranks publish
/// their GPU's UUID under `trainbook/gpu/RANK` in `base` (the launch store) and read all of
/// them (each waits at most the store's timeout for the others).
pub(crate) fn choose_backend(base: &Store, env: &LaunchEnv, device: Device) -> Result<Backend> {
    let Device::Cuda(index) = device else { return Ok(Backend::Gloo) };
    if !Backend::Nccl.is_available() {
        if env.rank == 0 {
            eprintln!(
                "trainbook: note: this build has no NCCL (the `cuda` feature): the group uses \
                 Gloo with CUDA tensors"
            );
        }
        return Ok(Backend::Gloo);
    }
    let mine = crate::shim::cuda_device_uuid(index)?;
    base.set(&format!("trainbook/gpu/{}", env.rank), &mine)?;
    let uuids = (0..env.world_size)
        .map(|r| base.get(&format!("trainbook/gpu/{r}")))
        .collect::<Result<Vec<_>>>()?;
    let backend = backend_for_gpus(&uuids);
    if backend == Backend::Gloo && env.rank == 0 {
        eprintln!(
            "trainbook: note: {} ranks run on {} GPU(s): NCCL needs a GPU per rank, so the group \
             uses Gloo (CUDA tensors staged through the host; slower than NCCL)",
            env.world_size,
            distinct(&uuids)
        );
    }
    Ok(backend)
}

/// NCCL when the ranks' GPU UUIDs are all different, else Gloo.
pub(crate) fn backend_for_gpus(uuids: &[Vec<u8>]) -> Backend {
    if distinct(uuids) == uuids.len() {
        Backend::Nccl
    } else {
        Backend::Gloo
    }
}

fn distinct(uuids: &[Vec<u8>]) -> usize {
    uuids.iter().collect::<std::collections::BTreeSet<_>>().len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccl_only_when_every_rank_has_a_gpu_of_its_own() {
        let (a, b) = (vec![1u8; 16], vec![2u8; 16]);
        assert_eq!(backend_for_gpus(&[a.clone(), b.clone()]), Backend::Nccl);
        assert_eq!(backend_for_gpus(&[a.clone(), a.clone()]), Backend::Gloo, "2 ranks, 1 GPU");
        assert_eq!(backend_for_gpus(&[a.clone(), b, a]), Backend::Gloo, "3 ranks, 2 GPUs");
    }
}
