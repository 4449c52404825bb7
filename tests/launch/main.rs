//! Whole programs under their launchers: the MNIST, DesignSafe and torchvision-recipe
//! examples, torchrun's restart after a killed worker, Ray, Dask, mpirun and the environments
//! of srun and mpiexec, a real one-node Slurm, the companion courses' examples on their
//! stand-ins, and the examples' flags through torchrun's parser.
//!
//! One module per former test binary (`tests/launch/<module>.rs`); a test's full name is
//! `<module>::<test>`. Every test first takes its module's turn (`common::module_turn`), so that
//! under `cargo test` the modules run one after another, as their binaries did, while the tests of
//! one module still run side by side. `slurm_cluster` holds no test: it is `slurm`'s one-node
//! cluster.
#[path = "../common/mod.rs"]
mod common;

mod companion_courses;
mod example_classify;
mod example_designsafe;
mod example_mnist;
mod fault_tolerance;
mod launchers;
mod multi_node;
mod slurm;
mod slurm_cluster;
mod torchrun_flags;
