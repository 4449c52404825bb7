//! The project's tools and documents: the set-up without root, the compiler and kernel caches,
//! the REPL and JupyterLab, the notebooks (run headless, and committed with their outputs),
//! the README's and the book's claims against the tree, BENCHMARKS.md against the benches' records, the ResNet weights script, and trainbook used from a
//! project outside the checkout.
//!
//! One module per former test binary (`tests/tooling/<module>.rs`); a test's full name is
//! `<module>::<test>`. Every test first takes its module's turn (`common::module_turn`), so that
//! under `cargo test` the modules run one after another, as their binaries did, while the tests of
//! one module still run side by side.
#[path = "../common/mod.rs"]
mod common;

mod answer_key;
mod benchmarks_md;
mod claims_index;
mod class_workspace;
mod compiler_cache;
mod docs_book;
mod docs_claims;
mod import_circles;
mod kernel_cache;
mod notebook_outputs;
mod notebooks;
mod oracle_server;
mod outside_project;
mod repl;
mod resnet_weights_script;
mod setup_no_root;
