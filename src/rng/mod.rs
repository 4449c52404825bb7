//! libtorch's default random generators, on the ground floor: their state read and restored
//! ([`generator`]: the CPU one, and one per CUDA device), and the turns that thread ranks of one
//! process take on the single CPU generator ([`turns`]), so that each rank draws from its own
//! stream as a process of its own would. Checkpoints, `spawn` and every collective that waits
//! for other ranks build on these; the public functions are re-exported by `trainbook::dist`.
mod generator;
mod turns;

pub use generator::{cpu_rng_state, manual_seed, rng_state, set_cpu_rng_state, set_rng_state};
pub(crate) use turns::{blocking, enter};
