//! torchvision's classifiers against torchvision (tests/oracle/vision_models.py): every
//! network the models module builds by a torchvision name has torchvision's state_dict names and
//! shapes and its parameter order; one network of each family (MobileNetV3 Large and Small,
//! ConvNeXt-Tiny, MobileNetV2, the SqueezeNets, AlexNet, VGG-11-BN, EfficientNet-B0 and V2-S,
//! DenseNet-121, RegNet Y and X 400MF, a small Vision Transformer of torchvision's class,
//! ShuffleNet V2 x0.5 and MNASNet 0.5) with torchvision's random weights (loaded strictly by
//! name) gives its eval-mode and train-mode logits (the same dropout and stochastic-depth draws
//! from the same seed), parameter gradients and updated BatchNorm statistics bit for bit, both
//! sides on one thread; AlexNet and ShuffleNet V2 start from torchvision's very weights after
//! the same seed. Every pretrained entry's evaluation sizes (`Weights::eval_sizes`) are
//! torchvision's.
use crate::common;

use std::collections::BTreeMap;
use std::process::Command;

use tch::nn::{ModuleT, VarStore};
use tch::{Device, Kind, Tensor};
use trainbook::models::{
    alexnet, convnext, densenet, efficientnet, load_safetensors, load_torchvision_file, mnasnet,
    mobilenet_v2, mobilenet_v3, regnet, shufflenet_v2, squeezenet, state_dict, vgg,
    vision_transformer, vit, VitConfig, Weights, DENSENET_NAMES, EFFICIENTNET_NAMES,
    EFFICIENTNET_V2_NAMES, MNASNET_NAMES, PRETRAINED, REGNET_NAMES, RESNET_NAMES,
    SHUFFLENET_V2_NAMES, VGG_NAMES, VIT_NAMES,
};
use trainbook::train::named_parameters;

/// Every network the names test checks: the lists the models module exports, and the others.
fn names() -> Vec<&'static str> {
    let others = ["mobilenet_v3_large", "mobilenet_v3_small", "mobilenet_v2", "alexnet"];
    let convnexts = ["convnext_tiny", "convnext_small", "convnext_base", "convnext_large"];
    let squeezenets = ["squeezenet1_0", "squeezenet1_1"];
    [
        &others[..],
        &convnexts,
        &squeezenets,
        &VGG_NAMES,
        &EFFICIENTNET_NAMES,
        &EFFICIENTNET_V2_NAMES,
        &DENSENET_NAMES,
        &REGNET_NAMES,
        &VIT_NAMES,
        &SHUFFLENET_V2_NAMES,
        &MNASNET_NAMES,
    ]
    .concat()
}

/// trainbook's network of torchvision's `name`, with `classes` outputs.
fn build(vs: &VarStore, name: &str, classes: i64) -> Box<dyn ModuleT> {
    let root = vs.root();
    match name {
        n if n.starts_with("convnext") => Box::new(convnext(&root, n, classes).unwrap()),
        n if n.starts_with("mobilenet_v3") => Box::new(mobilenet_v3(&root, n, classes).unwrap()),
        "mobilenet_v2" => Box::new(mobilenet_v2(&root, name, classes).unwrap()),
        n if n.starts_with("squeezenet") => Box::new(squeezenet(&root, n, classes).unwrap()),
        "alexnet" => Box::new(alexnet(&root, name, classes).unwrap()),
        n if n.starts_with("efficientnet") => Box::new(efficientnet(&root, n, classes).unwrap()),
        n if n.starts_with("densenet") => Box::new(densenet(&root, n, classes).unwrap()),
        n if n.starts_with("regnet") => Box::new(regnet(&root, n, classes).unwrap()),
        // torchvision's default image size.
        n if n.starts_with("vit_") && n != "vit_test" => {
            Box::new(vit(&root, n, classes, 224).unwrap())
        }
        "vit_test" => {
            let config = VitConfig {
                image_size: 64,
                patch_size: 16,
                num_layers: 2,
                num_heads: 4,
                hidden_dim: 64,
                mlp_dim: 128,
            };
            Box::new(vision_transformer(&root, &config, classes).unwrap())
        }
        n if n.starts_with("shufflenet") => Box::new(shufflenet_v2(&root, n, classes).unwrap()),
        n if n.starts_with("mnasnet") => Box::new(mnasnet(&root, n, classes).unwrap()),
        n => Box::new(vgg(&root, n, classes).unwrap()),
    }
}

/// The tests take turns: a pass seeds libtorch's global generator for its dropout draws, and
/// building a model draws from it.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn oracle(args: &[&str]) -> String {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/vision_models.py");
    let out = Command::new(common::venv_bin("python")).arg(script).args(args).output().unwrap();
    assert!(out.status.success(), "vision_models.py {args:?}: {}", common::text(&out));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn every_network_has_torchvisions_names_shapes_and_parameter_order() {
    let _turn = common::module_turn(module_path!());
    // Building draws from the global generator too.
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let want: serde_json::Value =
        serde_json::from_str(&oracle(&[&["names"][..], &names()[..]].concat())).unwrap();
    for name in names() {
        let vs = VarStore::new(Device::Cpu);
        let _net = build(&vs, name, 1000);
        let mut state: Vec<(String, Vec<i64>)> =
            state_dict(&vs).into_iter().map(|(n, t)| (n, t.size())).collect();
        let mut torch_state: Vec<(String, Vec<i64>)> =
            serde_json::from_value(want[name]["state"].clone()).unwrap();
        state.sort();
        torch_state.sort();
        assert_eq!(state, torch_state, "{name}: state_dict names and shapes");
        let order: Vec<String> = named_parameters(&vs).into_iter().map(|(n, _)| n).collect();
        let torch_order: Vec<String> =
            serde_json::from_value(want[name]["params"].clone()).unwrap();
        assert_eq!(order, torch_order, "{name}: parameter order");
    }
    let vs = VarStore::new(Device::Cpu);
    assert!(mobilenet_v3(&vs.root(), "mobilenet_v2", 10).is_err());
    assert!(convnext(&vs.root(), "convnext_huge", 10).is_err());
    assert!(vgg(&vs.root(), "vgg15_bn", 10).is_err());
    assert!(squeezenet(&vs.root(), "squeezenet1_2", 10).is_err());
    assert!(efficientnet(&vs.root(), "efficientnet_v2_xl", 10).is_err());
    assert!(regnet(&vs.root(), "regnet_z_400mf", 10).is_err());
    assert!(vit(&vs.root(), "vit_b_16", 10, 100).is_err(), "100 is not a multiple of 16");
    assert!(shufflenet_v2(&vs.root(), "shufflenet_v2_x3_0", 10).is_err());
    assert!(mnasnet(&vs.root(), "mnasnet2_0", 10).is_err());
}

#[test]
fn every_pretrained_entry_has_torchvisions_evaluation_sizes() {
    let _turn = common::module_turn(module_path!());
    let pairs: Vec<String> = PRETRAINED
        .iter()
        .map(|(m, w, _)| {
            let w = if *w == Weights::ImageNet1kV1 { "IMAGENET1K_V1" } else { "IMAGENET1K_V2" };
            format!("{m}:{w}")
        })
        .collect();
    let args: Vec<&str> =
        std::iter::once("eval_sizes").chain(pairs.iter().map(|p| p.as_str())).collect();
    let want: serde_json::Value = serde_json::from_str(&oracle(&args)).unwrap();
    for ((model, weights, _), pair) in PRETRAINED.iter().zip(&pairs) {
        let (resize, crop) = weights.eval_sizes(model).unwrap();
        assert_eq!(
            serde_json::json!([resize, crop, "bilinear"]),
            want[pair.as_str()],
            "{pair}: (resize, crop, interpolation)"
        );
    }
    assert!(Weights::ImageNet1kV2.eval_sizes("resnet18").is_err());
}

/// torchvision's random `name` loaded into trainbook's: one eval-mode and one train-mode pass;
/// with `same_draws`, trainbook's network built from the same seed first holds torchvision's
/// initial weights exactly (where both draw the same values in the same order).
fn same_passes_as_torchvision(name: &str, same_draws: bool) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let threads = tch::get_num_threads();
    tch::set_num_threads(1);
    let dir = common::WorkDir::new(name);
    oracle(&["pass", name, dir.to_str().unwrap()]);
    // torchvision's network was built right after torch.manual_seed(0).
    tch::manual_seed(0);
    let mut vs = VarStore::new(Device::Cpu);
    let net = build(&vs, name, 5);
    if same_draws {
        let torch = common::sorted_tensors(&dir.join("weights.safetensors"));
        let ours = vs.variables();
        // The oracle gave the BatchNorm layers random values after building.
        let batch_norms: Vec<String> = (torch.iter())
            .filter_map(|(n, _)| n.strip_suffix("running_mean").map(str::to_string))
            .collect();
        for (n, t) in &torch {
            if batch_norms.iter().any(|bn| n.starts_with(bn.as_str())) {
                continue;
            }
            assert!(ours[n].equal(t), "{name} {n}: not torchvision's initial value");
        }
    }
    let report = load_safetensors(&mut vs, &dir.join("weights.safetensors"), true).unwrap();
    assert_eq!(report.loaded.len(), vs.variables().len());
    let io: BTreeMap<String, Tensor> =
        common::sorted_tensors(&dir.join("io.safetensors")).into_iter().collect();
    let x = &io["x"];
    let check = |what: &str, got: &Tensor, want: &Tensor| {
        assert_eq!(got.size(), want.size(), "{name} {what}: shape");
        let diff = (got - want).abs().max().double_value(&[]);
        assert!(got.equal(want), "{name} {what}: max |diff| {diff:e} from torchvision");
    };
    check("eval logits", &tch::no_grad(|| net.forward_t(x, false)), &io["y_eval"]);
    tch::manual_seed(1);
    let y_train = net.forward_t(x, true);
    check("train logits", &y_train.detach(), &io["y_train"]);
    (&y_train * &io["w"]).sum(Kind::Float).backward();
    for (n, p) in &named_parameters(&vs) {
        check(&format!("gradient of {n}"), &p.grad(), &io[&format!("grad.{n}")]);
    }
    let mut stats = 0;
    for (n, t) in vs.variables() {
        if n.contains("running") {
            check(&format!("{n} after the train pass"), &t, &io[&format!("after.{n}")]);
            stats += 1;
        }
    }
    assert_eq!(stats, io.keys().filter(|k| k.starts_with("after.")).count());
    tch::set_num_threads(threads);
}

#[test]
fn mobilenet_v3_large_matches_torchvision_in_eval_and_train_mode() {
    let _turn = common::module_turn(module_path!());
    same_passes_as_torchvision("mobilenet_v3_large", false);
}

#[test]
fn mobilenet_v3_small_matches_torchvision_in_eval_and_train_mode() {
    let _turn = common::module_turn(module_path!());
    same_passes_as_torchvision("mobilenet_v3_small", false);
}

#[test]
fn convnext_tiny_matches_torchvision_in_eval_and_train_mode() {
    let _turn = common::module_turn(module_path!());
    same_passes_as_torchvision("convnext_tiny", false);
}

#[test]
fn mobilenet_v2_matches_torchvision_in_eval_and_train_mode() {
    let _turn = common::module_turn(module_path!());
    same_passes_as_torchvision("mobilenet_v2", false);
}

#[test]
fn squeezenets_match_torchvision_in_eval_and_train_mode() {
    let _turn = common::module_turn(module_path!());
    same_passes_as_torchvision("squeezenet1_0", false);
    same_passes_as_torchvision("squeezenet1_1", false);
}

#[test]
fn alexnet_starts_and_passes_as_torchvisions() {
    let _turn = common::module_turn(module_path!());
    same_passes_as_torchvision("alexnet", true);
}

#[test]
fn vgg11_bn_matches_torchvision_in_eval_and_train_mode() {
    let _turn = common::module_turn(module_path!());
    same_passes_as_torchvision("vgg11_bn", false);
}

#[test]
fn efficientnet_b0_matches_torchvision_in_eval_and_train_mode() {
    let _turn = common::module_turn(module_path!());
    same_passes_as_torchvision("efficientnet_b0", false);
}

#[test]
fn densenet121_matches_torchvision_in_eval_and_train_mode() {
    let _turn = common::module_turn(module_path!());
    same_passes_as_torchvision("densenet121", false);
}

#[test]
fn efficientnet_v2_s_matches_torchvision_in_eval_and_train_mode() {
    let _turn = common::module_turn(module_path!());
    same_passes_as_torchvision("efficientnet_v2_s", false);
}

#[test]
fn regnets_match_torchvision_in_eval_and_train_mode() {
    let _turn = common::module_turn(module_path!());
    same_passes_as_torchvision("regnet_y_400mf", false);
    same_passes_as_torchvision("regnet_x_400mf", false);
}

#[test]
fn a_vision_transformer_matches_torchvision_in_eval_and_train_mode() {
    let _turn = common::module_turn(module_path!());
    // Eval without gradients takes MultiheadAttention's fused fast path on both sides; the
    // train pass its Python path.
    same_passes_as_torchvision("vit_test", false);
}

#[test]
fn shufflenet_v2_starts_and_passes_as_torchvisions() {
    let _turn = common::module_turn(module_path!());
    same_passes_as_torchvision("shufflenet_v2_x0_5", true);
}

#[test]
fn mnasnet_matches_torchvision_in_eval_and_train_mode() {
    let _turn = common::module_turn(module_path!());
    same_passes_as_torchvision("mnasnet0_5", false);
}

/// The backquoted names in `text`.
fn quoted(text: &str) -> Vec<String> {
    text.split('`').skip(1).step_by(2).map(str::to_string).collect()
}

#[test]
fn the_recipe_page_lists_every_torchvision_classifier_as_built_or_not_with_its_reason() {
    let _turn = common::module_turn(module_path!());
    let torchvision: Vec<String> = serde_json::from_str(&oracle(&["list"])).unwrap();
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/torchvision-recipe.md"),
    )
    .unwrap();
    let built_paragraph = page.split("\nBuilt: ").nth(1).unwrap().split("\n\n").next().unwrap();
    let mut built = quoted(built_paragraph);
    let not_built_section =
        page.split("\nNot built yet").nth(1).unwrap().split("\n\n").nth(1).unwrap();
    let mut not_built = Vec::new();
    for item in not_built_section.split("\n- ").map(|i| i.trim_start_matches("- ")) {
        let (names, reason) = item.split_once("`: ").expect("a bullet: `names`: reason");
        assert!(reason.trim().len() > 20, "no reason given for {names}");
        not_built.extend(quoted(&format!("{names}`")));
    }
    // What the models module builds: every list of names, and the page's built list is it.
    let mut ours: Vec<String> =
        names().iter().chain(RESNET_NAMES.iter()).map(|n| n.to_string()).collect();
    ours.sort();
    built.sort();
    assert_eq!(built, ours, "the page's built list is what trainbook builds");
    let mut listed: Vec<String> = built.iter().chain(&not_built).cloned().collect();
    listed.sort();
    let mut want = torchvision.clone();
    want.sort();
    assert_eq!(listed, want, "the page lists each of torchvision's models once");
    let count = format!("for the {} models it builds", built.len());
    assert!(page.contains(&count), "the page says {count:?}");
    assert!(page.contains(&format!("of the {} that torchvision", torchvision.len())));
}

#[test]
fn torchvisions_older_parameter_names_load_as_its_loaders_rename_them() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = common::WorkDir::new("legacy-names");
    oracle(&["legacy", dir.to_str().unwrap()]);
    let io: BTreeMap<String, Tensor> =
        common::sorted_tensors(&dir.join("io.safetensors")).into_iter().collect();
    for name in ["densenet121", "vit_test"] {
        let threads = tch::get_num_threads();
        tch::set_num_threads(1);
        let mut vs = VarStore::new(Device::Cpu);
        let net = build(&vs, name, 5);
        let file = dir.join(format!("{name}.pth"));
        let report = load_torchvision_file(&mut vs, &file, true).unwrap();
        assert!(report.missing.is_empty(), "{name}: {report:?}");
        let y = tch::no_grad(|| net.forward_t(&io["x"], false));
        assert!(y.equal(&io[name]), "{name}: eval logits after loading the older names");
        tch::set_num_threads(threads);
        // Loaded as is, the older names do not fit.
        let mut vs = VarStore::new(Device::Cpu);
        let _net = build(&vs, name, 5);
        assert!(trainbook::models::load_weights(&mut vs, &file, true).is_err(), "{name}");
    }
}
