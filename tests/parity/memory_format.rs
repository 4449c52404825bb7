//! channels_last, against the default layout and against PyTorch:
//! - in eval mode, ResNet34's logits and gradients in channels_last equal the default layout's
//!   within a float32 rounding bound derived from the network's convolutions;
//! - in training mode (BatchNorm on batch statistics, which amplifies rounding: measured, the
//!   two layouts' gradients differ by up to ~2% in the early layers, in PyTorch exactly as here),
//!   each layout equals torchvision's ResNet34 in the same layout given the same weights.
use crate::common;

use std::process::Command;

use tch::nn::{ModuleT, VarStore};
use tch::{Device, Kind, Tensor};
use trainbook::models::{
    channels_last, is_channels_last, resnet34_classifier, to_channels_last, to_safetensors_bytes,
};
use trainbook::train::{named_parameters, CrossEntropyLoss};

struct Pass {
    logits: Tensor,
    grads: Vec<(String, Tensor)>,
    /// Rounding bound: the sum over the convolutions of their reduction lengths, times u.
    bound: f64,
    /// Weights, input, labels, logits and gradients, for the PyTorch oracle.
    dump: Vec<(String, Tensor)>,
}

/// libtorch's generator is shared by the test threads: one pass at a time draws from it.
static RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// One forward/backward pass of ResNet34 (course head) on fixed weights and input.
fn pass(layout_channels_last: bool, train: bool) -> Pass {
    let _rng = RNG.lock().unwrap_or_else(|e| e.into_inner());
    tch::set_num_threads(1);
    tch::manual_seed(21);
    let vs = VarStore::new(Device::Cpu);
    let net = resnet34_classifier(&vs.root(), 3);
    let x = Tensor::randn([4, 3, 40, 48], (Kind::Float, Device::Cpu));
    let y = Tensor::from_slice(&[0i64, 2, 1, 2]);
    let reductions: i64 = vs
        .variables()
        .values()
        .filter(|v| v.dim() == 4)
        .map(|w| w.size()[1] * w.size()[2] * w.size()[3])
        .sum();
    let mut dump: Vec<(String, Tensor)> =
        vs.variables().into_iter().map(|(n, t)| (format!("w.{n}"), t.detach().copy())).collect();
    dump.extend([("x".to_string(), x.copy()), ("y".to_string(), y.copy())]);
    let mut input = x;
    if layout_channels_last {
        to_channels_last(&vs);
        assert!(
            vs.variables().values().filter(|v| v.dim() == 4).all(is_channels_last),
            "every conv weight converted"
        );
        input = channels_last(&input);
        assert!(is_channels_last(&input));
    }
    let logits = net.forward_t(&input, train);
    CrossEntropyLoss::new().mean(&logits, &y).backward();
    let grads: Vec<(String, Tensor)> =
        named_parameters(&vs).into_iter().map(|(n, p)| (n, p.grad().contiguous())).collect();
    dump.extend(grads.iter().map(|(n, g)| (format!("g.{n}"), g.copy())));
    dump.push(("logits".into(), logits.detach().contiguous()));
    Pass {
        logits: logits.contiguous(),
        grads,
        bound: reductions as f64 * f64::from(f32::EPSILON) / 2.0,
        dump,
    }
}

fn rel(x: &Tensor, y: &Tensor) -> f64 {
    (x - y).abs().max().double_value(&[]) / y.abs().max().double_value(&[]).max(1e-30)
}

#[test]
fn eval_mode_channels_last_equals_the_default_layout_within_rounding() {
    let _turn = common::module_turn(module_path!());
    let (a, b) = (pass(false, false), pass(true, false));
    // The layouts use different convolution kernels, i.e. different summation orders. A sum of
    // n float32 products in any order is within n*u of its exact value, relative to the sum of
    // the products' magnitudes (u = 2^-24); through the network these bounds add up layer by
    // layer, so the sum of all reduction lengths times u bounds the relative difference of the
    // logits and gradients (measured against their largest entry).
    let bound = a.bound;
    let logits_rel = rel(&b.logits, &a.logits);
    assert!(logits_rel <= bound, "logits differ by {logits_rel:e} of their size (bound {bound:e})");
    let mut worst = 0.0f64;
    for ((name, x), (_, y)) in b.grads.iter().zip(&a.grads) {
        let r = rel(x, y);
        worst = worst.max(r);
        assert!(r <= bound, "{name}: gradient differs by {r:e} (bound {bound:e})");
    }
    println!("eval mode, channels_last vs default: logits {logits_rel:e}, gradients up to {worst:e}, bound {bound:e}");
}

#[test]
fn train_mode_each_layout_equals_torchvision_in_that_layout() {
    let _turn = common::module_turn(module_path!());
    let dir = common::WorkDir::new("channels-last");
    for (cl, layout) in [(false, "default"), (true, "channels_last")] {
        let p = pass(cl, true);
        let file = dir.join(format!("{layout}.safetensors"));
        std::fs::write(&file, to_safetensors_bytes(&p.dump, None).unwrap()).unwrap();
        let out = Command::new(common::venv_bin("python"))
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oracle/channels_last.py"))
            .arg(&file)
            .arg(layout)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let v: Vec<f64> = text.split_whitespace().map(|s| s.parse().unwrap()).collect();
        // The same libtorch kernels on one thread: equal by construction; 1e-6 allows for a
        // last-bit difference should a kernel choice ever differ.
        println!(
            "{layout}, training mode, vs torchvision: logits {:e}, gradients up to {:e}",
            v[0], v[1]
        );
        assert!(
            v[0] <= 1e-6 && v[1] <= 1e-6,
            "{layout}: logits {:e}, gradients {:e} from torchvision",
            v[0],
            v[1]
        );
    }
}
