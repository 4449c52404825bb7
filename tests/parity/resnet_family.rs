//! The ResNet family against torchvision (the venv's torch/torchvision as oracle):
//! - every network of `RESNET_NAMES` (the depths 18, 34, 50, 101, 152, the ResNeXts and Wide
//!   ResNets) has torchvision's state_dict names and shapes, and its parameters in
//!   torchvision's `named_parameters()` order (the order DDP's buckets follow);
//! - ResNet18 (torchvision's `fc`), ResNet34 (the course's model: the MLP head), ResNet50
//!   (bottlenecks, the MLP head), ResNeXt50 32x4d (grouped bottlenecks) and Wide ResNet50-2
//!   with torchvision's random weights, loaded strictly by name, give torchvision's eval-mode
//!   and train-mode logits, parameter gradients and updated BatchNorm statistics bit for bit;
//! - `freeze_backbone` trains only `fc.*` at either depth and with either head.
//!
//! tests/parity/models_parity.rs also loads ResNet34 from torchvision (with the default thread
//! counts on both sides, compared within 1e-4) and checks that PyTorch loads trainbook's weights.
use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use tch::nn::{ModuleT, VarStore};
use tch::{Device, Kind, Tensor};
use trainbook::models::{
    freeze_backbone, load_safetensors, resnet, resnet_by_name, state_dict, HeadKind, RESNET_NAMES,
};
use trainbook::train::{named_parameters, CrossEntropyLoss, Optimizer};

/// The oracle, run as `python -c ORACLE CMD ...`:
///
/// - `names NAME...`: for every network, torchvision's state_dict (name, shape) and
///   named_parameters() order, as JSON (models built on the meta device: nothing is allocated
///   or initialised);
/// - `pass NAME CLASSES HEAD DIR`: `get_model(NAME, num_classes=CLASSES)`, with the course head
///   when HEAD is `mlp`, from seed 0, through tests/oracle/models.py's `eval_and_train_pass`:
///   random BatchNorm affine parameters and statistics (so that eval mode is no identity),
///   DIR/weights.safetensors (the state_dict) and DIR/io.safetensors: input `x`, eval logits,
///   then in train mode the logits, the gradients `grad.*` of `(logits * w).sum()` and the
///   running statistics `after.*` the pass updated.
const ORACLE: &str = r#"
import json, sys
import torch, torchvision
from models import eval_and_train_pass  # tests/oracle/models.py, on PYTHONPATH

torch.set_num_threads(1)


def build(name, classes, head):
    m = torchvision.models.get_model(name, num_classes=classes)
    if head == "mlp":
        m.fc = torch.nn.Sequential(torch.nn.Linear(m.fc.in_features, 512), torch.nn.ReLU(),
                                   torch.nn.Linear(512, classes))
    return m


if sys.argv[1] == "names":
    out = {}
    for name in sys.argv[2:]:
        with torch.device("meta"):
            m = build(name, 1000, "linear")
        out[name] = {"state": [[k, list(v.shape)] for k, v in m.state_dict().items()],
                      "params": [n for n, _ in m.named_parameters()]}
    print(json.dumps(out))
elif sys.argv[1] == "pass":
    name, classes, head, d = sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
    torch.manual_seed(0)
    m = build(name, classes, head)
    eval_and_train_pass(m, classes, d)
"#;

fn oracle(args: &[&str]) -> String {
    // `output()` reads stdout as it comes (the names' JSON is larger than a pipe's buffer).
    let out = Command::new(common::venv_bin("python"))
        .arg("-c")
        .arg(ORACLE)
        .args(args)
        .env("PYTHONPATH", Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle"))
        .output()
        .unwrap();
    assert!(out.status.success(), "oracle {args:?}: {}", common::text(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// libtorch's thread count is per process: the tests of this module all run on one thread (the
/// other modules of the binary wait for their turn: `common::module_turn`).
fn one_thread() {
    tch::set_num_threads(1);
}

#[test]
fn every_network_has_torchvisions_names_shapes_and_parameter_order() {
    let _turn = common::module_turn(module_path!());
    one_thread();
    let mut cmd = vec!["names"];
    cmd.extend(RESNET_NAMES);
    let want: serde_json::Value = serde_json::from_str(&oracle(&cmd)).unwrap();
    for depth in RESNET_NAMES {
        let vs = VarStore::new(Device::Cpu);
        let _net = resnet_by_name(&vs.root(), depth, 1000, HeadKind::Linear).unwrap();
        let mut state: Vec<(String, Vec<i64>)> =
            state_dict(&vs).into_iter().map(|(n, t)| (n, t.size())).collect();
        let mut torch_state: Vec<(String, Vec<i64>)> =
            serde_json::from_value(want[depth.to_string()]["state"].clone()).unwrap();
        state.sort();
        torch_state.sort();
        assert_eq!(state, torch_state, "{depth}: state_dict names and shapes");
        let order: Vec<String> = named_parameters(&vs).into_iter().map(|(n, _)| n).collect();
        let torch_order: Vec<String> =
            serde_json::from_value(want[depth.to_string()]["params"].clone()).unwrap();
        assert_eq!(order, torch_order, "{depth}: parameter order");
        println!("{depth}: {} state_dict entries as torchvision's", state.len());
    }
}

/// Loads torchvision's random network `depth` (a name of `RESNET_NAMES`) into trainbook's and
/// compares one eval-mode and one train-mode pass, bit for bit.
fn same_passes_as_torchvision(depth: &str, head: HeadKind) {
    one_thread();
    let classes = 5;
    let dir = common::WorkDir::new(depth);
    let head_arg = if head == HeadKind::Mlp { "mlp" } else { "linear" };
    oracle(&["pass", depth, &classes.to_string(), head_arg, dir.to_str().unwrap()]);
    let mut vs = VarStore::new(Device::Cpu);
    let net = resnet_by_name(&vs.root(), depth, classes, head).unwrap();
    // Strict: every name of torchvision's state_dict is trainbook's and vice versa.
    let report = load_safetensors(&mut vs, &dir.join("weights.safetensors"), true).unwrap();
    assert_eq!(report.loaded.len(), vs.variables().len());
    let io: BTreeMap<String, Tensor> =
        common::sorted_tensors(&dir.join("io.safetensors")).into_iter().collect();
    let x = &io["x"];

    // Both sides run the same libtorch library's kernels (conv2d, batch_norm, max_pool2d,
    // adaptive_avg_pool2d, linear and their backward functions) on the same contiguous float32
    // tensors in the same order, each on one thread: the results are equal by construction,
    // so any difference, however small, is a difference in the model (an op, a stride, a
    // padding, an order of the residual sum), not rounding. (In-place `relu_` and `+=` in
    // torchvision compute the same values as trainbook's out-of-place ops.) The loss
    // `(logits * w).sum()` hands both backward passes exactly `w` as the logits' gradient.
    let mut worst = 0.0f64;
    let mut check = |what: &str, got: &Tensor, want: &Tensor| {
        assert_eq!(got.size(), want.size(), "{depth} {what}: shape");
        let diff = (got - want).abs().max().double_value(&[]);
        worst = worst.max(diff);
        assert!(got.equal(want), "{depth} {what}: max |diff| {diff:e} from torchvision");
    };
    let y_eval = tch::no_grad(|| net.forward_t(x, false));
    check("eval logits", &y_eval, &io["y_eval"]);
    let y_train = net.forward_t(x, true);
    check("train logits", &y_train.detach(), &io["y_train"]);
    (&y_train * &io["w"]).sum(Kind::Float).backward();
    let params = named_parameters(&vs);
    for (name, p) in &params {
        check(&format!("gradient of {name}"), &p.grad(), &io[&format!("grad.{name}")]);
    }
    let mut stats = 0;
    for (name, t) in vs.variables() {
        if name.contains("running") {
            check(&format!("{name} after the train pass"), &t, &io[&format!("after.{name}")]);
            stats += 1;
        }
    }
    assert_eq!(stats, io.keys().filter(|k| k.starts_with("after.")).count());
    println!(
        "{depth} ({head:?} head) vs torchvision: eval and train logits, {} gradients and \
         {stats} running statistics equal (max |diff| {worst:e})",
        params.len()
    );
}

#[test]
fn resnet18_matches_torchvision_in_eval_and_train_mode() {
    let _turn = common::module_turn(module_path!());
    same_passes_as_torchvision("resnet18", HeadKind::Linear);
}

#[test]
fn resnet34_matches_torchvision_in_eval_and_train_mode() {
    let _turn = common::module_turn(module_path!());
    same_passes_as_torchvision("resnet34", HeadKind::Mlp);
}

#[test]
fn resnet50_matches_torchvision_in_eval_and_train_mode() {
    let _turn = common::module_turn(module_path!());
    same_passes_as_torchvision("resnet50", HeadKind::Mlp);
}

#[test]
fn resnext50_32x4d_matches_torchvision_in_eval_and_train_mode() {
    let _turn = common::module_turn(module_path!());
    same_passes_as_torchvision("resnext50_32x4d", HeadKind::Linear);
}

#[test]
fn wide_resnet50_2_matches_torchvision_in_eval_and_train_mode() {
    let _turn = common::module_turn(module_path!());
    same_passes_as_torchvision("wide_resnet50_2", HeadKind::Linear);
}

#[test]
fn freezing_the_backbone_trains_only_the_head_at_every_depth() {
    let _turn = common::module_turn(module_path!());
    one_thread();
    for (depth, head) in [(18, HeadKind::Mlp), (50, HeadKind::Linear)] {
        let vs = VarStore::new(Device::Cpu);
        let net = resnet(&vs.root(), depth, 3, head).unwrap();
        freeze_backbone(&vs, true);
        let before: Vec<(String, Tensor)> =
            vs.variables().into_iter().map(|(n, t)| (n, t.copy())).collect();
        let mut opt = Optimizer::adam(&vs, 1e-2);
        let x = Tensor::randn([2, 3, 32, 32], (Kind::Float, Device::Cpu));
        let y = Tensor::from_slice(&[0i64, 2]);
        opt.zero_grad();
        CrossEntropyLoss::new().mean(&net.forward_t(&x, false), &y).backward();
        opt.step().unwrap();
        let now = vs.variables();
        for (name, old) in &before {
            let changed = !now[name].equal(old);
            assert_eq!(changed, name.starts_with("fc."), "resnet{depth}: {name} changed={changed}");
        }
        freeze_backbone(&vs, false);
        let last = if depth == 50 { "layer4.2.conv3.weight" } else { "layer4.1.conv2.weight" };
        assert!(now[last].requires_grad() && now["layer1.0.bn1.weight"].requires_grad());
        assert!(!now["layer1.0.bn1.running_var"].requires_grad());
    }
}
