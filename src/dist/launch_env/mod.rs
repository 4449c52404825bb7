//! The rank layout a launcher puts in the environment, normalised into one [`LaunchEnv`]: one
//! file per launcher, all building the layout through the same checked constructor in
//! `layout.rs`, and `detect.rs` choosing among them.
//!
//! - `torchrun.rs`: RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, as set by torchrun, trainbook's Ray
//!   and Dask launchers, or by hand.
//! - `mpi.rs`: Open MPI's `mpirun` (`OMPI_COMM_WORLD_*`), and MPICH-family `mpiexec`/`ibrun`
//!   (MPICH/Hydra, Intel MPI, MVAPICH) through PMI.
//! - `slurm.rs`: Slurm's `srun`, with Slurm's list syntaxes in `slurm_lists.rs`.
//!
//! Precedence, most explicit first: RANK/WORLD_SIZE, then Open MPI, then PMI, then Slurm. So
//! `torchrun` or `mpirun` inside a Slurm allocation is read as what it is, and PMI wins over
//! Slurm because Hydra-based `mpiexec` starts one Slurm task per node, whose SLURM_PROCID is a
//! node index rather than a rank.
//!
//! The HPC launchers say who is who, but not where rank 0's TCPStore lives, so
//! MASTER_ADDR/MASTER_PORT come from the environment when set, and otherwise from these defaults:
//!
//! | launcher | rank / world / local rank                                 | MASTER_ADDR default                  | MASTER_PORT default          |
//! |----------|-----------------------------------------------------------|--------------------------------------|------------------------------|
//! | Slurm    | SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID                | first host of the step's node list, then SLURM_LAUNCH_NODE_IPADDR | 29500 + SLURM_JOB_ID % 1000 |
//! | Open MPI | OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK                 | 127.0.0.1 when all ranks share a node | 29500                       |
//! | PMI      | PMI_RANK / PMI_SIZE / MPI_LOCALRANKID (or MV2_…_LOCAL_RANK) | 127.0.0.1 when all ranks share a node | 29500                       |
mod detect;
mod layout;
mod mpi;
mod slurm;
mod slurm_lists;
mod torchrun;
mod vars;

pub use layout::{LaunchEnv, Launcher, DEFAULT_MASTER_PORT};
pub use slurm_lists::first_host;
