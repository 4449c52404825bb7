//! `torch.save` files both ways, against the venv's PyTorch (tests/oracle/torch_files.py):
//! torchvision's hub-cache file of a seeded resnet18 loads and gives torchvision's logits bit for
//! bit; the course's checkpoint dict and torchvision's train.py checkpoint read with their
//! optimizer states, numbers and `args`; trainbook's files load in PyTorch with
//! `weights_only=True` and give trainbook's logits bit for bit.
use crate::common;

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use tch::nn::{ModuleT, VarStore};
use tch::{Device, Kind, Tensor};
use trainbook::models::{
    from_safetensors_bytes, load_weights, resnet18, to_safetensors_bytes, HeadKind,
};
use trainbook::models::{load_state_dict_file, save_state_dict};
use trainbook::torch_file::{self, TorchValue};

/// Runs tests/oracle/torch_files.py with `args`; its stdout.
pub(crate) fn oracle_text(args: &[&str]) -> String {
    let out = Command::new(common::venv_bin("python"))
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oracle/torch_files.py"))
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "oracle {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn oracle(args: &[&str]) -> Value {
    serde_json::from_str(&oracle_text(args)).unwrap()
}

fn io(dir: &Path, name: &str) -> Tensor {
    let path = dir.join("io.safetensors");
    let ts = from_safetensors_bytes(&std::fs::read(&path).unwrap(), &path).unwrap();
    ts.into_iter().find(|(n, _)| n == name).unwrap().1
}

fn logits(vs_net: &impl ModuleT, x: &Tensor) -> Tensor {
    tch::no_grad(|| vs_net.forward_t(x, false))
}

#[test]
fn a_torchvision_hub_file_gives_torchvisions_logits_bit_for_bit() {
    let _turn = common::module_turn(module_path!());
    tch::set_num_threads(2);
    let dir = common::WorkDir::new("torch-file-hub");
    oracle(&["write", dir.to_str().unwrap()]);
    let mut vs = VarStore::new(Device::Cpu);
    let net = resnet18(&vs.root(), 1000, HeadKind::Linear);
    let file = dir.join("hub/checkpoints/resnet18-f37072fd.pth");
    let report = load_weights(&mut vs, &file, true).unwrap();
    assert_eq!(report.loaded.len(), vs.variables().len());
    let y = logits(&net, &io(&dir, "x"));
    let want = io(&dir, "y");
    assert!(y.equal(&want), "max |diff| {}", (&y - &want).abs().max().double_value(&[]));

    // The course's 3-class model takes the backbone, reports the new head, and a strict load
    // refuses with the names.
    let mut course = VarStore::new(Device::Cpu);
    let _ = trainbook::models::resnet18_classifier(&course.root(), 3);
    let report = load_weights(&mut course, &file, false).unwrap();
    assert_eq!(report.missing, ["fc.0.bias", "fc.0.weight", "fc.2.bias", "fc.2.weight"]);
    assert_eq!(report.unexpected, ["fc.weight", "fc.bias"]);
    let err = load_weights(&mut course, &file, true).unwrap_err().to_string();
    assert!(err.contains("resnet18-f37072fd.pth") && err.contains("fc.0.weight"), "{err}");
}

#[test]
fn checkpoints_of_the_course_and_of_torchvisions_recipe_read_with_their_states() {
    let _turn = common::module_turn(module_path!());
    let dir = common::WorkDir::new("torch-file-ckpt");
    let facts = oracle(&["write", dir.to_str().unwrap()]);

    let course = torch_file::load(dir.join("course.pt")).unwrap();
    assert_eq!(course.keys(), ["epoch", "model_state_dict", "optimizer_state_dict", "loss"]);
    assert_eq!(course.get("epoch").and_then(TorchValue::as_i64), Some(3));
    let loss = course.get("loss").and_then(TorchValue::as_f64).unwrap();
    assert_eq!(
        format!("{loss:e}"),
        format!("{:e}", f64_from_hex(facts["loss_hex"].as_str().unwrap()))
    );
    assert_eq!(loss.to_bits(), f64_from_hex(facts["loss_hex"].as_str().unwrap()).to_bits());
    let opt = course.get("optimizer_state_dict").unwrap();
    let state = opt.get("state").unwrap();
    let want_keys: Vec<String> =
        facts["state_keys"].as_array().unwrap().iter().map(|k| k.to_string()).collect();
    assert_eq!(state.keys(), want_keys);
    match state {
        TorchValue::Dict(entries) => {
            let (k, first) = &entries[0];
            assert!(matches!(k, TorchValue::Int(0)));
            assert_eq!(first.keys(), ["step", "exp_avg", "exp_avg_sq"]);
            assert_eq!(first.get("exp_avg").unwrap().as_tensor().unwrap().size(), [64, 3, 7, 7]);
        }
        other => panic!("state: {other:?}"),
    }
    let group = match opt.get("param_groups") {
        Some(TorchValue::List(groups)) => &groups[0],
        other => panic!("param_groups: {other:?}"),
    };
    assert_eq!(group.get("lr").and_then(TorchValue::as_f64), facts["lr"].as_f64());
    let params: Vec<i64> = match group.get("params") {
        Some(TorchValue::List(p)) => p.iter().map(|v| v.as_i64().unwrap()).collect(),
        other => panic!("params: {other:?}"),
    };
    let want: Vec<i64> =
        facts["params"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
    assert_eq!(params, want);
    let mut vs = VarStore::new(Device::Cpu);
    let _ = resnet18(&vs.root(), 1000, HeadKind::Linear);
    load_state_dict_file(&mut vs, dir.join("course.pt"), true).unwrap();

    // torchvision's train.py checkpoint: the model under "model", its args as an object.
    let reference = torch_file::load(dir.join("reference.pth")).unwrap();
    match reference.get("args") {
        Some(TorchValue::Object { class, .. }) => assert_eq!(class, "argparse.Namespace"),
        other => panic!("args: {other:?}"),
    }
    let args = reference.get("args").unwrap();
    assert_eq!(args.get("model").and_then(TorchValue::as_str), Some("resnet18"));
    assert_eq!(args.get("epochs").and_then(TorchValue::as_i64), Some(90));
    load_state_dict_file(&mut vs, dir.join("reference.pth"), true).unwrap();
    let err = torch_file::save(dir.join("again.pth"), &reference).unwrap_err().to_string();
    assert!(err.contains("argparse.Namespace"), "{err}");

    // Views share their storage, as in PyTorch; other dtypes, ints beyond 32 bits, a set.
    let v = torch_file::load(dir.join("views.pt")).unwrap();
    let t = |k: &str| v.get(k).and_then(TorchValue::as_tensor).unwrap().shallow_clone();
    let base = Tensor::arange(12, (Kind::Float, Device::Cpu)).view([3, 4]);
    assert!(t("base").equal(&base) && t("row").equal(&base.get(1)));
    assert!(t("col").equal(&base.select(1, 2)) && t("t").equal(&base.tr()));
    assert_eq!(t("col").stride(), [4]);
    assert_eq!(t("row").data_ptr() as usize - t("base").data_ptr() as usize, 16);
    assert!(t("half").equal(&Tensor::arange(3, (Kind::Half, Device::Cpu))));
    assert_eq!(t("long").int64_value(&[0]), -(1i64 << 40));
    assert_eq!(t("mask").kind(), Kind::Bool);
    assert_eq!(v.get("big").and_then(TorchValue::as_i64), Some(1 << 40));
    assert_eq!(v.get("neg").and_then(TorchValue::as_i64), Some(-5));
    assert_eq!(v.get("pi").and_then(TorchValue::as_f64), Some(3.25));
    match v.get("nested") {
        Some(TorchValue::List(items)) => {
            assert!(matches!(&items[0], TorchValue::Tuple(p) if p[1].as_str() == Some("x")));
            assert!(matches!(items[1].get("k"), Some(TorchValue::None)));
        }
        other => panic!("nested: {other:?}"),
    }
    assert!(
        matches!(v.get("classes"), Some(TorchValue::Object { class, .. }) if class == "builtins.set")
    );

    let err = torch_file::load(dir.join("legacy.pt")).unwrap_err().to_string();
    assert!(err.contains("legacy.pt") && err.contains("legacy format"), "{err}");
    let err = load_state_dict_file(&mut vs, dir.join("io.safetensors"), true).unwrap_err();
    assert!(err.to_string().contains("io.safetensors"), "{err}");
}

#[test]
fn pytorch_loads_trainbooks_files_with_weights_only_and_gets_the_same_logits() {
    let _turn = common::module_turn(module_path!());
    tch::set_num_threads(2);
    let dir = common::WorkDir::new("torch-file-out");
    oracle(&["write", dir.to_str().unwrap()]);
    tch::manual_seed(5);
    let vs = VarStore::new(Device::Cpu);
    let net = resnet18(&vs.root(), 1000, HeadKind::Linear);
    save_state_dict(&vs, dir.join("from_rust.pth")).unwrap();
    let y = logits(&net, &io(&dir, "x"));
    std::fs::write(
        dir.join("rust_y.safetensors"),
        to_safetensors_bytes(&[("y".into(), y)], None).unwrap(),
    )
    .unwrap();
    let values = TorchValue::Dict(vec![
        ("epoch".into(), 2i64.into()),
        ("loss".into(), 0.1f64.into()),
        ("flags".into(), TorchValue::List(vec![true.into(), TorchValue::None])),
        ("pair".into(), TorchValue::Tuple(vec!["a".into(), 1.5f64.into()])),
        (TorchValue::Int(7), Tensor::from_slice(&[1.0f32, -2.5]).to_kind(Kind::BFloat16).into()),
    ]);
    torch_file::save(dir.join("from_rust_values.pt"), &values).unwrap();
    let seen = oracle(&["read", dir.to_str().unwrap()]);
    assert_eq!(seen["logits_equal"], true, "{seen}");
    let want: Value = serde_json::json!({"dict": [
        ["'epoch'", {"int": 2}],
        ["'loss'", {"float": "0x1.999999999999ap-4"}],
        ["'flags'", {"list": [{"bool": true}, {"NoneType": null}]}],
        ["'pair'", {"tuple": [{"str": "a"}, {"float": "0x1.8000000000000p+0"}]}],
        ["7", {"tensor": "torch.bfloat16", "shape": [2], "values": [1.0, -2.5]}]
    ]});
    assert_eq!(seen["values"], want);
}

/// Python's `float.hex()` spelling (`0x1.8p+1`) as an f64.
fn f64_from_hex(s: &str) -> f64 {
    let (sign, s) = s.strip_prefix('-').map_or((1.0, s), |r| (-1.0, r));
    let s = s.strip_prefix("0x").unwrap();
    let (mantissa, exp) = s.split_once('p').unwrap();
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut bits = u64::from_str_radix(int, 16).unwrap() as f64;
    for (i, c) in frac.chars().enumerate() {
        bits += c.to_digit(16).unwrap() as f64 / 16f64.powi(i as i32 + 1);
    }
    sign * bits * 2f64.powi(exp.parse().unwrap())
}
