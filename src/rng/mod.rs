//! Random generators on the ground floor: libtorch's default generators, their state read and
//! restored ([`generator`]: the CPU one, and one per CUDA device); the turns that thread ranks of
//! one process take on the single CPU generator ([`turns`]), so that each rank draws from its own
//! stream as a process of its own would; and PyTorch's CPU generator reproduced in Rust with
//! `torch.randperm` ([`torch_generator`]), which the samplers, `random_split` and the random
//! transforms draw from. Checkpoints, `spawn`, the data and the transforms build on these; the
//! public functions are re-exported by `trainbook::dist` and `trainbook::data`.
mod generator;
mod torch_generator;
mod turns;

pub use generator::{cpu_rng_state, manual_seed, rng_state, set_cpu_rng_state, set_rng_state};
pub use torch_generator::{randperm, TorchGenerator};
pub(crate) use torch_generator::{skip_randperm, EpochGenerator};
pub(crate) use turns::{blocking, enter};
