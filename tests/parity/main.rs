//! Parity with PyTorch and torchvision (the venv's installation as the oracle, through the
//! scripts in tests/oracle/): JPEG decoding against Pillow, the transforms and random crops,
//! the distributed sampler's indices, the models (ResNet family, initialisation, channels_last,
//! optimizers), `torch.save` files both ways, TorchScript modules both ways, torch.hub's cache, and a smoke test of the libtorch stack itself.
//!
//! One module per former test binary (`tests/parity/<module>.rs`); a test's full name is
//! `<module>::<test>`. Every test first takes its module's turn (`common::module_turn`), so that
//! under `cargo test` the modules run one after another, as their binaries did, while the tests of
//! one module still run side by side.
#[path = "../common/mod.rs"]
mod common;

mod augmix_parity;
mod color_jitter_parity;
mod interpretation;
mod jpeg_parity;
mod memory_format;
mod mix_parity;
mod model_summary;
mod models_init;
mod models_parity;
mod optimizer_rules;
mod random_crop_parity;
mod resnet_family;
mod sampler_parity;
mod tch_smoke;
mod torch_files;
mod torch_hub;
mod torch_optim_state;
mod torchscript;
mod transforms_parity;
mod vision_models;
