//! Optimizer states in PyTorch's layout, against torch.optim (tests/oracle/torch_files.py
//! `optim`): a run checkpointed by PyTorch after 2 steps (the course's `optimizer_state_dict`)
//! continues in trainbook for 3 steps to PyTorch's weights, and trainbook's exported state loads
//! into torch.optim and takes the same next step, for SGD (momentum, Nesterov, weight decay)
//! and Adam (weight decay). The bound is the optimizer parity test's (relative 1e-5): the two
//! sides run the same update rule, not always the same kernels in the same order.
use crate::common;

use std::path::Path;

use tch::nn::{ModuleT, VarStore};
use tch::{Device, Tensor};
use trainbook::models::load_state_dict_file;
use trainbook::models::{from_safetensors_bytes, state_dict, MnistNet};
use trainbook::torch_file::{self, TorchValue};
use trainbook::train::{CrossEntropyLoss, Kernels, Optimizer, OptimizerKind};

fn oracle(args: &[&str]) {
    crate::torch_files::oracle_text(args);
}

fn read(path: &Path) -> Vec<(String, Tensor)> {
    from_safetensors_bytes(&std::fs::read(path).unwrap(), path).unwrap()
}

fn step(net: &MnistNet, opt: &mut Optimizer, x: &Tensor, y: &Tensor) {
    opt.zero_grad();
    CrossEntropyLoss::new().mean(&net.forward_t(x, false), y).backward();
    opt.step().unwrap();
}

fn assert_close(vs: &VarStore, want: &[(String, Tensor)], what: &str) {
    for (name, t) in state_dict(vs) {
        if let Some((_, w)) = want.iter().find(|(n, _)| *n == name) {
            let rel = common::max_abs(&t, w) / w.abs().max().double_value(&[]).max(1e-12);
            assert!(rel <= 1e-5, "{what} {name}: relative difference {rel}");
        }
    }
}

#[test]
fn pytorch_optimizer_states_continue_in_trainbook_and_back() {
    let _turn = common::module_turn(module_path!());
    tch::set_num_threads(2);
    let dir = common::WorkDir::new("torch-optim");
    oracle(&["optim", dir.to_str().unwrap()]);
    let io = read(&dir.join("io.safetensors"));
    let (x, y) = (common::get(&io, "x"), common::get(&io, "y"));
    for name in ["sgd", "adam"] {
        let ckpt_path = dir.join(format!("{name}_ckpt.pt"));
        let ckpt = torch_file::load(&ckpt_path).unwrap();
        let mut vs = VarStore::new(Device::Cpu);
        let net = MnistNet::new(&vs.root());
        load_state_dict_file(&mut vs, &ckpt_path, true).unwrap();
        // Built with other hyper-parameters: the file's win, as in torch's load_state_dict.
        let mut opt = match name {
            "sgd" => Optimizer::sgd(&vs, 1.0, 0.5),
            _ => Optimizer::adam(&vs, 1.0),
        }
        .with_kernels(Kernels::PerTensor);
        opt.load_torch_state_dict(ckpt.get("optimizer_state_dict").unwrap()).unwrap();
        match (name, opt.kind()) {
            ("sgd", OptimizerKind::Sgd { momentum, nesterov, weight_decay, dampening }) => {
                assert_eq!((momentum, nesterov, weight_decay, dampening), (0.9, true, 1e-4, 0.0));
                assert_eq!(opt.lr(), 0.05);
            }
            ("adam", OptimizerKind::Adam { beta1, beta2, eps, weight_decay }) => {
                assert_eq!((beta1, beta2, eps, weight_decay), (0.9, 0.999, 1e-8, 1e-4));
                assert_eq!(opt.lr(), 1e-3);
                let (_, meta) = opt.state_dict();
                assert!(meta.steps.values().all(|&s| s == 2), "{:?}", meta.steps);
            }
            other => panic!("{other:?}"),
        }
        for _ in 0..3 {
            step(&net, &mut opt, x, y);
        }
        assert_close(&vs, &read(&dir.join(format!("{name}_after.safetensors"))), name);

        // Back to PyTorch: torch.optim loads trainbook's state and takes the next step with it.
        let out = TorchValue::Dict(vec![
            ("model_state_dict".into(), TorchValue::from_tensors(&state_dict(&vs))),
            ("optimizer_state_dict".into(), opt.torch_state_dict()),
        ]);
        torch_file::save(dir.join(format!("rust_{name}.pt")), &out).unwrap();
        oracle(&["optim_continue", dir.to_str().unwrap(), name]);
        step(&net, &mut opt, x, y);
        assert_close(&vs, &read(&dir.join(format!("{name}_torch_next.safetensors"))), name);
    }

    // Another rule, or other groups, is refused and names why; the optimizer is unchanged.
    let ckpt = torch_file::load(dir.join("adam_ckpt.pt")).unwrap();
    let vs = VarStore::new(Device::Cpu);
    let _ = MnistNet::new(&vs.root());
    let mut sgd = Optimizer::sgd(&vs, 0.1, 0.9);
    let err = sgd.load_torch_state_dict(ckpt.get("optimizer_state_dict").unwrap()).unwrap_err();
    assert!(err.to_string().contains("the file's optimizer is Adam"), "{err}");
    assert_eq!(sgd.lr(), 0.1);
    let mut grouped = Optimizer::adam(&vs, 0.1)
        .param_group(trainbook::train::ParamGroup::prefix("fc2."))
        .unwrap();
    let err = grouped.load_torch_state_dict(ckpt.get("optimizer_state_dict").unwrap()).unwrap_err();
    assert!(
        err.to_string().contains("param groups hold [8] parameters, this optimizer's [6, 2]"),
        "{err}"
    );
}
