//! Saving, restoring and seeding libtorch's default generators: the process's CPU generator
//! (`torch.get_rng_state` / `set_rng_state`) and each CUDA device's
//! (`torch.cuda.get_rng_state(i)` / `set_rng_state(state, i)`), through the C++ shim; and
//! [`manual_seed`], which seeds a rank's generators without touching other GPUs'.

use tch::Device;

use crate::shim::c10d::{tb_rng_get_state, tb_rng_manual_seed, tb_rng_set_state};
use crate::shim::{check, take_bytes};
use crate::{Error, Result};

/// The state of libtorch's default CPU generator (what `torch.get_rng_state()` returns).
pub fn cpu_rng_state() -> Result<Vec<u8>> {
    rng_state(Device::Cpu)
}

/// Restores a state saved by [`cpu_rng_state`] (`torch.set_rng_state`).
pub fn set_cpu_rng_state(state: &[u8]) -> Result<()> {
    set_rng_state(Device::Cpu, state)
}

/// The shim's (device type, index) for a device that has a default generator.
fn rng_device(device: Device) -> Result<(i32, i32)> {
    match device {
        Device::Cpu => Ok((0, 0)),
        Device::Cuda(i) => Ok((1, i as i32)),
        other => Err(Error::InvalidArgument(format!(
            "no default random generator to save for {other:?}"
        ))),
    }
}

/// The state of `device`'s default generator: `torch.get_rng_state()` for the CPU,
/// `torch.cuda.get_rng_state(i)` for `Cuda(i)` (an error naming the device where CUDA is
/// not available).
///
/// ```
/// use trainbook::dist::{rng_state, set_rng_state};
/// use trainbook::tch::{Device, Tensor};
///
/// let saved = rng_state(Device::Cpu)?;
/// let a = Tensor::rand([3], (trainbook::tch::Kind::Float, Device::Cpu));
/// set_rng_state(Device::Cpu, &saved)?;
/// let b = Tensor::rand([3], (trainbook::tch::Kind::Float, Device::Cpu));
/// assert!(a.equal(&b), "the same state draws the same numbers");
/// # Ok::<(), trainbook::Error>(())
/// ```
pub fn rng_state(device: Device) -> Result<Vec<u8>> {
    let (kind, index) = rng_device(device)?;
    let (mut ptr, mut len) = (std::ptr::null_mut(), 0usize);
    // SAFETY: out-pointers are valid; on success `ptr` owns `len` bytes, taken below.
    check(&format!("get {device:?} RNG state"), unsafe {
        tb_rng_get_state(kind, index, &mut ptr, &mut len)
    })?;
    // SAFETY: the shim returned `len` bytes at `ptr` on success; they are freed once, here.
    Ok(unsafe { take_bytes(ptr, len) })
}

/// Restores a state saved by [`rng_state`] for the same device.
pub fn set_rng_state(device: Device, state: &[u8]) -> Result<()> {
    let (kind, index) = rng_device(device)?;
    // SAFETY: the slice is valid for the call.
    check(&format!("set {device:?} RNG state"), unsafe {
        tb_rng_set_state(kind, index, state.as_ptr(), state.len())
    })
}

/// Seeds `device`'s default generator alone (`torch.cuda.manual_seed(seed)` on that device,
/// or the CPU part of `torch.manual_seed`).
pub(crate) fn seed_generator(device: Device, seed: i64) -> Result<()> {
    let (kind, index) = rng_device(device)?;
    // SAFETY: a plain call; errors come back as an owned message.
    check(&format!("seed the {device:?} generator"), unsafe {
        tb_rng_manual_seed(kind, index, seed as u64)
    })
}

/// Seeds the generators a rank working on `device` draws from: the CPU generator (data,
/// augmentations, CPU models) and, for `Cuda(i)`, that GPU's generator only. What
/// `torch.manual_seed(seed)` does for such a rank, except that no other GPU's generator is
/// reseeded: `torch.manual_seed` and `tch::manual_seed` reseed every GPU, which would reset the
/// streams of thread ranks running on the other GPUs at the same time. Call it from the rank
/// (a [`spawn`](crate::launch::spawn)ed closure holds its turn on the shared generators), or
/// use [`Dist::manual_seed`](crate::dist::Dist::manual_seed). Errors name the device where
/// its generator cannot be reached (CUDA not usable).
///
/// ```
/// use trainbook::dist::manual_seed;
/// use trainbook::tch::{Device, Kind, Tensor};
///
/// manual_seed(Device::Cpu, 7)?;
/// let a = Tensor::rand([3], (Kind::Float, Device::Cpu));
/// trainbook::tch::manual_seed(7);
/// let b = Tensor::rand([3], (Kind::Float, Device::Cpu));
/// assert!(a.equal(&b), "the CPU stream of torch.manual_seed(7)");
/// # Ok::<(), trainbook::Error>(())
/// ```
pub fn manual_seed(device: Device, seed: i64) -> Result<()> {
    seed_generator(Device::Cpu, seed)?;
    match device {
        Device::Cuda(_) => seed_generator(device, seed),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gpu_generator_is_seeded_only_where_cuda_is_usable() {
        if tch::Cuda::is_available() {
            return; // tests/gpu.rs checks the GPU side
        }
        // Not the CPU generator: other tests of this binary draw from it at the same time.
        let err = seed_generator(Device::Cuda(0), 1).unwrap_err().to_string();
        assert!(err.contains("Cuda(0)"), "{err}");
        assert!(seed_generator(Device::Mps, 1).is_err());
    }
}
