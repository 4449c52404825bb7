//! Several ranks: the c10d shim across processes, DDP against one process and when things go
//! wrong, PyTorch and trainbook ranks in one group, `launch::spawn`'s thread ranks against
//! torchrun processes, and SyncBatchNorm. Several of its tests start this binary again as
//! their ranks (`common::ranks`), each module's own `rank_worker` by its full test name.
//!
//! One module per former test binary (`tests/distributed/<module>.rs`); a test's full name is
//! `<module>::<test>`. Every test first takes its module's turn (`common::module_turn`), so that
//! under `cargo test` the modules run one after another, as their binaries did, while the tests of
//! one module still run side by side.
#[path = "../common/mod.rs"]
mod common;

mod c10d_multiprocess;
mod ddp;
mod ddp_evaluation;
mod ddp_failures;
mod ddp_graph_exchange;
mod mixed_groups;
mod own_sampler;
mod spawn;
mod sync_batch_norm;
mod unsharded_loader;
