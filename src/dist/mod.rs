//! Communication over PyTorch's own c10d: `Dist` (the launcher's environment, the process
//! group, the device), the binding of c10d's gradient `Reducer` (which
//! [`Ddp`](crate::train::Ddp), a training strategy, drives), SyncBatchNorm's collective, and
//! underneath them TCPStore and Gloo/NCCL process groups reached through the C++ shim in
//! `csrc/`. This is the low layer (as `torch.distributed` is below `nn.parallel`): it imports
//! only the shim, the generators and the crate's error. The
//! generators' state ([`rng_state`], ...) and [`torch_version`] come from the crate's ground
//! floor and are re-exported here, where the course meets them.
mod backend_choice;
mod free_port;
mod launch_env;
mod nccl_error;
mod peer_loss;
mod process_group;
mod reducer;
mod store;
mod sync_batch_norm;
mod world;

pub use free_port::free_port;
pub use launch_env::{first_host, LaunchEnv, Launcher, DEFAULT_MASTER_PORT};
pub use peer_loss::{failure_line, peer_lost};
pub use process_group::{
    connect, connect_on_device, default_group_store, Backend, ProcessGroup, Work,
};
pub use reducer::CommHook;
pub(crate) use reducer::{Reducer, ReducerConfig};
pub use store::Store;
pub use sync_batch_norm::{NormParams, SyncGroup};
pub use world::{Dist, DistOptions};

pub use crate::rng::{cpu_rng_state, manual_seed, rng_state, set_cpu_rng_state, set_rng_state};
pub use crate::shim::{current_cuda_device, torch_version};
