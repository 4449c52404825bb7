//! The libtorch stack links and computes: tensors, autograd, and the versions trainbook reports;
//! trainbook's layers differ from tch's only in the order they register parameters. (The only
//! test here that draws random numbers: libtorch's generator is shared by the test threads.)
use crate::common;

use trainbook::tch::{Device, Kind, Tensor};

#[test]
fn tensors_and_autograd_work() {
    let _turn = common::module_turn(module_path!());
    let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0]).set_requires_grad(true);
    let y = (&x * &x).sum(Kind::Float);
    y.backward();
    let grad: Vec<f32> = Vec::try_from(x.grad()).unwrap();
    assert_eq!(grad, vec![2.0, 4.0, 6.0]);
    let m = Tensor::arange(6, (Kind::Float, Device::Cpu))
        .view([2, 3])
        .matmul(&Tensor::ones([3, 1], (Kind::Float, Device::Cpu)));
    assert_eq!(Vec::<f32>::try_from(m.flatten(0, -1)).unwrap(), vec![3.0, 12.0]);
}

#[test]
fn versions_match_the_pinned_libtorch() {
    let _turn = common::module_turn(module_path!());
    let v = trainbook::versions();
    assert_eq!(v.libtorch, "2.13.0", "tch 0.26 is built for libtorch 2.13.0");
    assert!(std::path::Path::new(v.libtorch_lib_dir).join("libtorch_cpu.so").exists(), "{v}");
    assert_eq!(v.nccl_built_in, cfg!(feature = "cuda"));
    assert!(v.to_string().contains("libtorch  2.13.0"));
}

#[test]
fn trainbook_layers_register_weight_first_within_torchs_bounds() {
    let _turn = common::module_turn(module_path!());
    use trainbook::models::{conv2d, linear};
    use trainbook::tch::nn::VarStore;
    // Drawn as PyTorch's reset_parameters draws them (tests/parity/models_init.rs compares a whole
    // seeded network with PyTorch's, bit for bit): every value within 1/sqrt(fan_in).
    let ours = VarStore::new(Device::Cpu);
    linear(&(ours.root() / "fc"), 20, 7);
    conv2d(&(ours.root() / "conv"), 3, 4, 3, Default::default());
    let ours = trainbook::train::named_parameters(&ours);
    let names: Vec<&str> = ours.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["fc.weight", "fc.bias", "conv.weight", "conv.bias"], "PyTorch's order");
    for (name, t) in &ours {
        assert!(t.requires_grad(), "{name} must be trainable");
        let fan_in = if name.starts_with("fc") { 20.0 } else { 3.0 * 9.0 };
        let max = t.abs().max().double_value(&[]);
        assert!(max > 0.0 && max <= 1.0 / f64::sqrt(fan_in), "{name}: max |value| {max}");
    }
}
