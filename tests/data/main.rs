//! Data sets and their preparation: ImageFolder, MNIST and the loader against torchvision,
//! splits, subsets and relabelling against torch, Tiny ImageNet's layout, and preparing a
//! stand-in data set from two places at once, and the extra inputs of a model of several inputs.
//!
//! One module per former test binary (`tests/data/<module>.rs`); a test's full name is
//! `<module>::<test>`. Every test first takes its module's turn (`common::module_turn`), so that
//! under `cargo test` the modules run one after another, as their binaries did, while the tests of
//! one module still run side by side.
#[path = "../common/mod.rs"]
mod common;

mod data_loading;
mod data_preparation;
mod data_split;
mod extra_inputs;
mod tiny_imagenet;
mod weighted_sampler;
