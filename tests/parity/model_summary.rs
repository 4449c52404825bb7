//! `models::summary` against PyTorch's own counts (tests/oracle/summary.py): for a ResNet34
//! with 3 classes and its backbone frozen, every top-level module's parameter count and
//! trainable count, the totals, the parameters' bytes and the output shape equal what
//! `child.parameters()` and a forward pass of torchvision's ResNet34 give (BatchNorm's running
//! statistics are buffers in both).
use crate::common;

use std::process::Command;

use tch::nn::VarStore;
use tch::Device;
use trainbook::models::{freeze_backbone, resnet, summary, HeadKind};

#[test]
fn the_summary_counts_what_pytorch_counts() {
    let _turn = common::module_turn(module_path!());
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/summary.py");
    let out = Command::new(common::venv_bin("python")).arg(script).arg("counts").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let want: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();

    let vs = VarStore::new(Device::Cpu);
    let net = resnet(&vs.root(), 34, 3, HeadKind::Linear).unwrap();
    freeze_backbone(&vs, true);
    let s = summary(&vs, Some((&net, &[2, 3, 64, 64])), 1).unwrap();
    let rows: Vec<serde_json::Value> =
        s.rows.iter().map(|r| serde_json::json!([r.name, r.params, r.trainable])).collect();
    assert_eq!(serde_json::Value::from(rows), want["rows"], "{s}");
    assert_eq!(serde_json::json!(s.total), want["total"]);
    assert_eq!(serde_json::json!(s.trainable), want["trainable"]);
    assert_eq!(serde_json::json!(s.bytes), want["bytes"]);
    assert_eq!(serde_json::json!(s.output_shape), want["output_shape"]);
    let text = s.to_string();
    assert!(text.contains("| layer4 |  13.1 M | no"), "{text}");
    assert!(text.contains("| fc     |   1.5 K | yes"), "{text}");
    assert!(text.contains("21.3 M     Total params"), "{text}");
    // Deeper: the blocks of each layer.
    let deeper = summary(&vs, None, 2).unwrap();
    assert_eq!(deeper.rows.iter().filter(|r| r.name.starts_with("layer1.")).count(), 3);
    assert_eq!(deeper.total, s.total);
}
