//! `Trainer::detect_anomaly` against torch's `detect_anomaly` (tests/oracle/anomaly.py): a model
//! whose logits are all NaN stops in its first backward pass with the message PyTorch gives for
//! the same model, naming the backward function (libtorch's own check); without it the same run
//! ends at the epoch's end with the loss not finite; the process-wide switch is back off after
//! the run either way.
use crate::common;

use std::process::Command;

use tch::nn::{self, ModuleT, VarStore};
use tch::{Device, Tensor};
use trainbook::dist::Dist;
use trainbook::fit::Trainer;
use trainbook::train::{is_anomaly_enabled, Optimizer};

/// The oracle's model: a linear layer whose outputs, shifted by -1e6, go through a square root.
#[derive(Debug)]
struct NanLogits(nn::Linear);

impl ModuleT for NanLogits {
    fn forward_t(&self, xs: &Tensor, _train: bool) -> Tensor {
        (xs.flatten(1, -1).apply(&self.0) - 1e6).sqrt()
    }
}

fn fit(out: &std::path::Path, anomaly: bool) -> trainbook::Error {
    let dist = Dist::single(Device::Cpu);
    let mut vs = VarStore::new(Device::Cpu);
    let net = NanLogits(nn::linear(vs.root() / "fc", 784, 10, Default::default()));
    let mut opt = Optimizer::sgd(&vs, 0.1, 0.0);
    let (mut train, mut val) =
        (common::random_mnist_loader(1, 8), common::random_mnist_loader(2, 4));
    Trainer::new(&dist)
        .out(out)
        .progress(false)
        .detect_anomaly(anomaly)
        .fit(&mut vs, &net, &mut opt, &mut train, &mut val)
        .unwrap_err()
}

#[test]
fn the_first_nan_of_the_backward_pass_is_named_as_pytorch_names_it() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("anomaly");
    let oracle = common::venv_bin("python");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/anomaly.py");
    let out = Command::new(oracle).arg(script).arg("message").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let pytorch = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(pytorch.starts_with("Function '"), "{pytorch}");

    let err = fit(&work.join("on"), true);
    let trainbook::Error::Anomaly { epoch, message } = &err else { panic!("{err}") };
    assert_eq!((*epoch, message.as_str()), (1, pytorch.as_str()), "PyTorch: {pytorch}");
    assert!(!is_anomaly_enabled().unwrap(), "the switch is back off");
    let err = fit(&work.join("off"), false).to_string();
    assert!(!err.contains("returned nan values") && err.contains("epoch 1"), "{err}");
    assert!(!is_anomaly_enabled().unwrap());
}
