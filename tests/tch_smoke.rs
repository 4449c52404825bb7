//! The libtorch stack links and computes: tensors, autograd, and the versions trainbook reports.
use trainbook::tch::{Device, Kind, Tensor};

#[test]
fn tensors_and_autograd_work() {
    let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0]).set_requires_grad(true);
    let y = (&x * &x).sum(Kind::Float);
    y.backward();
    let grad: Vec<f32> = Vec::try_from(x.grad()).unwrap();
    assert_eq!(grad, vec![2.0, 4.0, 6.0]);
    let m = Tensor::arange(6, (Kind::Float, Device::Cpu)).view([2, 3]).matmul(&Tensor::ones([3, 1], (Kind::Float, Device::Cpu)));
    assert_eq!(Vec::<f32>::try_from(m.flatten(0, -1)).unwrap(), vec![3.0, 12.0]);
}

#[test]
fn versions_match_the_pinned_libtorch() {
    let v = trainbook::versions();
    assert_eq!(v.libtorch, "2.13.0", "tch 0.26 is built for libtorch 2.13.0");
    assert!(std::path::Path::new(v.libtorch_lib_dir).join("libtorch_cpu.so").exists(), "{v}");
    assert_eq!(v.nccl_built_in, cfg!(feature = "cuda"));
    assert!(v.to_string().contains("libtorch  2.13.0"));
}
