//! Distributed training over PyTorch's own c10d: `Dist` (the launcher's environment, the
//! process group, the device), `Ddp` (torch DDP on c10d's own Reducer), and underneath them
//! TCPStore and Gloo/NCCL process groups reached through the C++ shim in `csrc/`.
mod ddp;
mod ffi;
mod free_port;
mod launch_env;
mod process_group;
mod reducer;
mod store;
mod world;

use std::time::Duration;

use tch::Device;

pub use ddp::{Ddp, DdpOptions};
pub(crate) use ffi::take_message as take_shim_message;
pub use free_port::free_port;
pub use launch_env::{first_host, LaunchEnv, Launcher, DEFAULT_MASTER_PORT};
pub use process_group::{Backend, ProcessGroup, Work};
pub use reducer::CommHook;
pub use store::Store;
pub use world::{Dist, DistOptions};

use crate::Result;

/// Version of the libtorch the c10d shim was compiled against (e.g. "2.13.0").
pub fn torch_version() -> &'static str {
    // SAFETY: returns a pointer to a static NUL-terminated string inside the shim.
    unsafe { std::ffi::CStr::from_ptr(ffi::tb_torch_version()) }.to_str().unwrap_or("unknown")
}

/// The state of libtorch's default CPU generator (what `torch.get_rng_state()` returns).
pub fn cpu_rng_state() -> Result<Vec<u8>> {
    rng_state(Device::Cpu)
}

/// Restores a state saved by [`cpu_rng_state`] (`torch.set_rng_state`).
pub fn set_cpu_rng_state(state: &[u8]) -> Result<()> {
    set_rng_state(Device::Cpu, state)
}

fn rng_device(device: Device) -> Result<(i32, i32)> {
    match device {
        Device::Cpu => Ok((0, 0)),
        Device::Cuda(i) => Ok((1, i as i32)),
        other => Err(crate::Error::InvalidArgument(format!(
            "no default random generator to save for {other:?}"
        ))),
    }
}

/// The state of `device`'s default generator: `torch.get_rng_state()` for the CPU,
/// `torch.cuda.get_rng_state(i)` for `Cuda(i)` (an error naming the device where CUDA is
/// not available).
pub fn rng_state(device: Device) -> Result<Vec<u8>> {
    let (kind, index) = rng_device(device)?;
    let (mut ptr, mut len) = (std::ptr::null_mut(), 0usize);
    // SAFETY: out-pointers are valid; on success `ptr` owns `len` bytes, freed below.
    ffi::check(&format!("get {device:?} RNG state"), unsafe {
        ffi::tb_rng_get_state(kind, index, &mut ptr, &mut len)
    })?;
    let bytes = unsafe { std::slice::from_raw_parts(ptr, len).to_vec() };
    unsafe { ffi::tb_bytes_free(ptr) };
    Ok(bytes)
}

/// Restores a state saved by [`rng_state`] for the same device.
pub fn set_rng_state(device: Device, state: &[u8]) -> Result<()> {
    let (kind, index) = rng_device(device)?;
    // SAFETY: the slice is valid for the call.
    ffi::check(&format!("set {device:?} RNG state"), unsafe {
        ffi::tb_rng_set_state(kind, index, state.as_ptr(), state.len())
    })
}

/// Joins the process group described by `env`: connects to (or hosts) the TCPStore at
/// MASTER_ADDR:MASTER_PORT and creates the group with the store keys of
/// `torch.distributed.init_process_group(init_method="env://")`, so PyTorch ranks and
/// trainbook ranks can form one group. Every wait is bounded by `timeout`; a missing peer is
/// an error naming what was awaited.
///
/// A restarted attempt (TORCHELASTIC_RESTART_COUNT > 0) scopes its keys further
/// ([`LaunchEnv::restart_scope`]), so that it never reads the keys of the attempt that died.
pub fn connect(env: &LaunchEnv, backend: Backend, timeout: Duration) -> Result<ProcessGroup> {
    let mut base = Store::tcp(
        &env.master_addr,
        env.master_port,
        env.hosts_store(),
        Some(env.world_size),
        timeout,
    )?;
    if let Some(scope) = env.restart_scope() {
        base = base.with_prefix(&scope)?;
    }
    let store = default_group_store(&base, backend)?;
    ProcessGroup::new(store, backend, env.rank, env.world_size, timeout)
}

/// The view of the launch store that torch's default group uses: `init_process_group` scopes
/// the store to `default_pg`, the group to its name `0/`, and its backend to the device type
/// (keys such as `default_pg/0//cpu//0/1`, where Gloo publishes rank 1's address).
pub fn default_group_store(base: &Store, backend: Backend) -> Result<Store> {
    let device = match backend {
        Backend::Gloo => "cpu/",
        Backend::Nccl => "cuda/",
    };
    base.with_prefix("default_pg")?.with_prefix("0/")?.with_prefix(device)
}
