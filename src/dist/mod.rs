//! Distributed training over PyTorch's own c10d: `Dist` (the launcher's environment, the
//! process group, the device), `Ddp` (torch DDP on c10d's own Reducer), and underneath them
//! TCPStore and Gloo/NCCL process groups reached through the C++ shim in `csrc/`. The
//! generators' state ([`rng_state`], ...) and [`torch_version`] come from the crate's ground
//! floor and are re-exported here, where the course meets them.
mod ddp;
mod env;
mod env_vars;
mod ffi;
mod free_port;
mod hpc_env;
mod init;
mod process_group;
mod reducer;
mod slurm_lists;
mod store;

pub use ddp::{Ddp, DdpOptions};
pub use env::{LaunchEnv, Launcher};
pub use free_port::free_port;
pub use hpc_env::DEFAULT_MASTER_PORT;
pub use init::{Dist, DistOptions};
pub use process_group::{connect, default_group_store, Backend, ProcessGroup, Work};
pub use reducer::CommHook;
pub use slurm_lists::first_host;
pub use store::Store;

pub use crate::rng::{cpu_rng_state, rng_state, set_cpu_rng_state, set_rng_state};
pub use crate::shim::torch_version;
