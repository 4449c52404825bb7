//! The models start where PyTorch's do (tests/oracle/init.py): the MNIST CNN built after
//! `tch::manual_seed(5)` holds, bit for bit, the weights of PyTorch's `Net` after
//! `torch.manual_seed(5)` (the same generator, the same kernels, the same draws in the same
//! order); the ResNet34 has torchvision's initialisation, checked by its distributions (its
//! draws differ: torchvision draws every convolution twice, once by `Conv2d`'s own default and
//! again by its Kaiming-normal loop): BatchNorm weights 1 and biases 0 exactly, every
//! convolution's standard deviation within sampling error of `sqrt(2 / fan_out)`, the head
//! uniform within `1/sqrt(fan_in)` as torchvision's own draws are.
use crate::common;

use tch::nn::VarStore;
use tch::{Device, Kind};
use trainbook::models::{resnet34, HeadKind, MnistNet};

#[test]
fn the_models_start_from_pytorchs_initialisation() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("models-init");
    let torch = common::oracle_tensors("init.py", "weights", &work);

    tch::manual_seed(5);
    let vs = VarStore::new(Device::Cpu);
    let _net = MnistNet::new(&vs.root());
    let ours = vs.variables();
    let theirs = common::with_prefix(&torch, "mnist.");
    assert_eq!(ours.len(), theirs.len());
    for (name, t) in &theirs {
        assert!(
            ours[name].equal(t),
            "MNIST CNN {name}: max |diff| {}",
            common::max_abs(&ours[name], t)
        );
    }

    tch::manual_seed(5);
    let vs = VarStore::new(Device::Cpu);
    let _net = resnet34(&vs.root(), 3, HeadKind::Linear);
    let ours = vs.variables();
    let theirs = common::with_prefix(&torch, "resnet34.");
    assert_eq!(ours.len(), theirs.len(), "the same parameters and buffers");
    let std = |t: &tch::Tensor| t.to_kind(Kind::Double).std(true).double_value(&[]);
    for (name, t) in &theirs {
        let mine = &ours[name];
        assert_eq!(mine.size(), t.size(), "{name}");
        if name.contains("bn") || name.contains("downsample.1") {
            // Weight 1, bias 0, running mean 0, running variance 1: constants on both sides.
            assert!(mine.equal(t), "{name}");
        } else if name.starts_with("fc.") {
            let bound = 1.0 / 512f64.sqrt();
            let max = mine.abs().max().double_value(&[]);
            assert!(max <= bound && t.abs().max().double_value(&[]) <= bound, "{name}: {max}");
            // Uniform within the bound: a standard deviation of bound / sqrt(3), whose sample
            // estimate has a standard error of about 0.45 sigma / sqrt(n) (a uniform's fourth
            // moment is 9/5 sigma^4): 5 of them allowed.
            let (n, sigma) = (mine.numel() as f64, bound / 3f64.sqrt());
            let tolerance = 5.0 * 0.45 * sigma / n.sqrt();
            assert!((std(mine) - sigma).abs() <= tolerance, "{name}: std {} vs {sigma}", std(mine));
        } else {
            // Kaiming normal, fan-out: std sqrt(2 / (c_out * k * k)). A sample's standard
            // deviation has a standard error of about sigma / sqrt(2n): 5 of them allowed.
            let s = t.size();
            let sigma = (2.0 / (s[0] * s[2] * s[3]) as f64).sqrt();
            let n = mine.numel() as f64;
            let tolerance = 5.0 * sigma / (2.0 * n).sqrt();
            for (side, w) in [("trainbook", mine), ("torchvision", t)] {
                assert!(
                    (std(w) - sigma).abs() <= tolerance,
                    "{name} ({side}): std {} vs {sigma}",
                    std(w)
                );
            }
        }
    }
}
