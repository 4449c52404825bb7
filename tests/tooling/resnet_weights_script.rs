//! data-scripts/resnet_weights.py, the weights exporter for ResNet18/34/50:
//! - its `--random-init` files for depths 18 and 50 load strictly into trainbook's
//!   `resnet(.., depth, 1000, HeadKind::Linear)` and give torchvision's eval-mode logits for the
//!   same weights and input, bit for bit (CPU, one thread, as in tests/parity/resnet_family.rs);
//! - without network (an unreachable download address and an empty TORCH_HOME) it prints one
//!   paragraph naming the address and what to do, no traceback, and exits with status 2.
use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use tch::nn::{ModuleT, VarStore};
use tch::{Device, Tensor};
use trainbook::models::{load_safetensors, resnet, HeadKind};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data-scripts/resnet_weights.py");

/// `python -c ORACLE DEPTH WEIGHTS OUT`: torchvision's `resnet{DEPTH}()` with the weights file
/// loaded strictly, in eval mode on one thread; writes OUT with the input `x` and logits `y`.
const ORACLE: &str = r#"
import sys
import torch, torchvision
from safetensors.torch import load_file, save_file

torch.set_num_threads(1)
depth, weights, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
m = getattr(torchvision.models, f"resnet{depth}")()
m.load_state_dict(load_file(weights), strict=True)
m.eval()
torch.manual_seed(7)
x = torch.randn(2, 3, 64, 64)
with torch.no_grad():
    y = m(x)
save_file({"x": x.contiguous(), "y": y.contiguous()}, out)
"#;

fn python(args: &[&str], envs: &[(&str, &Path)]) -> Output {
    let mut cmd = Command::new(common::venv_bin("python"));
    cmd.args(args);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

#[test]
fn random_init_exports_load_strictly_and_match_torchvision_logits() {
    let _turn = common::module_turn(module_path!());
    tch::set_num_threads(1);
    let dir = common::WorkDir::new("resnet-weights");
    for depth in [18usize, 50] {
        let file = dir.join(format!("resnet{depth}.safetensors"));
        let d = depth.to_string();
        let f = file.to_str().unwrap();
        let out = python(&[SCRIPT, "--depth", &d, "--out", f, "--random-init", "--seed", "3"], &[]);
        assert!(out.status.success(), "exporter: {}", common::text(&out));
        let io = dir.join(format!("io{depth}.safetensors"));
        let out = python(&["-c", ORACLE, &d, f, io.to_str().unwrap()], &[]);
        assert!(out.status.success(), "oracle: {}", common::text(&out));

        let mut vs = VarStore::new(Device::Cpu);
        let net = resnet(&vs.root(), depth, 1000, HeadKind::Linear).unwrap();
        let report = load_safetensors(&mut vs, &file, true).unwrap();
        assert_eq!(report.loaded.len(), vs.variables().len(), "resnet{depth}");
        let io: BTreeMap<String, Tensor> = common::sorted_tensors(&io).into_iter().collect();
        let y = tch::no_grad(|| net.forward_t(&io["x"], false));
        assert_eq!(y.size(), vec![2, 1000]);
        let diff = (&y - &io["y"]).abs().max().double_value(&[]);
        assert!(y.equal(&io["y"]), "resnet{depth}: logits differ from torchvision by {diff:e}");
        println!("resnet{depth}: {} tensors loaded strictly, logits equal", report.loaded.len());
    }
}

#[test]
fn offline_download_says_what_to_do_and_exits_2() {
    let _turn = common::module_turn(module_path!());
    let dir = common::WorkDir::new("resnet-weights-offline");
    let url = "http://127.0.0.1:9/resnet18-f37072fd.pth";
    let out = dir.join("never.safetensors");
    let result = python(
        &[SCRIPT, "--depth", "18", "--out", out.to_str().unwrap()],
        &[("TORCH_HOME", &dir), ("TRAINBOOK_WEIGHTS_URL", Path::new(url))],
    );
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert_eq!(result.status.code(), Some(2), "{}", common::text(&result));
    assert!(stderr.contains(url) && stderr.contains("--random-init"), "{stderr}");
    assert!(stderr.contains(&format!("{}/hub/checkpoints", dir.display())), "{stderr}");
    assert!(!stderr.contains("Traceback"), "{stderr}");
    assert!(!out.exists());
}
