//! trainbook's transforms against torchvision/PIL (the venv's installation is the oracle), on
//! JPEGs and PNGs of odd sizes generated here: decoding, Resize/CenterCrop/ToTensor/Normalize
//! within 1/255, every AutoAugment, RandAugment and TrivialAugmentWide operation bit-exact (the
//! shears, translations and rotations with NEAREST, BILINEAR and BICUBIC resampling), and
//! the magnitude tables of RandAugment and TrivialAugmentWide bit for bit.
use crate::common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};
use trainbook::compose;
use trainbook::data::load_rgb;
use trainbook::data::TorchGenerator;
use trainbook::transforms::{
    aug_rng, AugmentOp, AugmentSpace, CenterCrop, EraseValue, Image, Interpolation, Normalize,
    RandomErasing, Resize, ToTensor, RAND_AUGMENT_OPS,
};

/// A photo-like test picture: gradients, a few blocks and deterministic noise.
fn picture(width: u32, height: u32, seed: u32) -> image::RgbImage {
    let mut state = seed.wrapping_mul(2654435761).wrapping_add(1);
    image::RgbImage::from_fn(width, height, |x, y| {
        state = state.wrapping_mul(1664525).wrapping_add(1013904223);
        let noise = (state >> 24) as i32 % 24 - 12;
        let block = if (x / 23 + y / 17) % 3 == 0 { 60 } else { 0 };
        let r = (x * 255 / width.max(1)) as i32 + noise;
        let g = (y * 255 / height.max(1)) as i32 + block - noise;
        let b = ((x + y) % 256) as i32 / 2 + block;
        image::Rgb([r.clamp(0, 255) as u8, g.clamp(0, 255) as u8, b.clamp(0, 255) as u8])
    })
}

fn write_images(dir: &Path) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    for (i, &(w, h)) in
        [(317u32, 211u32), (640, 479), (97, 131), (251, 250), (33, 401)].iter().enumerate()
    {
        let img = picture(w, h, i as u32);
        let png = dir.join(format!("img{i}_{w}x{h}.png"));
        img.save(&png).unwrap();
        let jpg = dir.join(format!("img{i}_{w}x{h}.jpg"));
        let mut f = std::fs::File::create(&jpg).unwrap();
        image::codecs::jpeg::JpegEncoder::new_with_quality(&mut f, 90).encode_image(&img).unwrap();
        paths.push(png);
        paths.push(jpg);
    }
    paths
}

fn run_oracle(cases: &[Value], out: &Path) -> Vec<Vec<usize>> {
    let mut child = Command::new(common::venv_bin("python"))
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oracle/transforms.py"))
        .arg(out)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(Value::Array(cases.to_vec()).to_string().as_bytes())
        .unwrap();
    let result = child.wait_with_output().unwrap();
    assert!(result.status.success(), "oracle failed");
    serde_json::from_slice(&result.stdout).unwrap()
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

#[test]
fn transforms_match_torchvision() {
    let _turn = common::module_turn(module_path!());
    let dir = common::WorkDir::new("transforms");
    let out = dir.join("oracle");
    std::fs::create_dir_all(&out).unwrap();
    let images = write_images(&dir);

    let pipelines: Vec<(Value, trainbook::transforms::Compose, f32)> = vec![
        (
            json!([["Resize", [244, 244]], ["ToTensor"]]),
            compose![Resize::new((244, 244)), ToTensor],
            1.0 / 255.0,
        ),
        (
            json!([
                ["Resize", 256],
                ["CenterCrop", 224],
                ["ToTensor"],
                ["Normalize", [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]]
            ]),
            compose![Resize::new(256), CenterCrop::new(224), ToTensor, Normalize::imagenet()],
            1.0 / 255.0 / 0.224,
        ),
        (
            json!([["CenterCrop", [300, 120]], ["ToTensor"]]),
            compose![CenterCrop::new((300, 120)), ToTensor],
            1e-6,
        ),
        (json!([["Resize", 450], ["ToTensor"]]), compose![Resize::new(450), ToTensor], 1.0 / 255.0),
        (
            json!([["Resize", [31, 57]], ["ToTensor"]]),
            compose![Resize::new((31, 57)), ToTensor],
            1.0 / 255.0,
        ),
        // --interpolation nearest.
        (
            json!([["Resize", [31, 57], "nearest"], ["ToTensor"]]),
            compose![Resize::new((31, 57)).interpolation(Interpolation::Nearest), ToTensor],
            1e-6,
        ),
        (
            json!([["Resize", 450, "nearest"], ["ToTensor"]]),
            compose![Resize::new(450).interpolation(Interpolation::Nearest), ToTensor],
            1e-6,
        ),
        // --interpolation bicubic: PIL's bytes, shrinking, enlarging and both at once.
        (
            json!([["Resize", [31, 57], "bicubic"], ["ToTensor"]]),
            compose![Resize::new((31, 57)).interpolation(Interpolation::Bicubic), ToTensor],
            1e-6,
        ),
        (
            json!([["Resize", 450, "bicubic"], ["ToTensor"]]),
            compose![Resize::new(450).interpolation(Interpolation::Bicubic), ToTensor],
            1e-6,
        ),
        (
            json!([["Resize", [200, 90], "bicubic"], ["ToTensor"]]),
            compose![Resize::new((200, 90)).interpolation(Interpolation::Bicubic), ToTensor],
            1e-6,
        ),
    ];
    let ops: Vec<(AugmentOp, &str, Vec<f32>)> = vec![
        (AugmentOp::ShearX, "ShearX", vec![0.3, -0.16666667, 0.033333335]),
        (AugmentOp::ShearY, "ShearY", vec![-0.3, 0.2]),
        (AugmentOp::TranslateX, "TranslateX", vec![41.0, -97.3]),
        (AugmentOp::TranslateY, "TranslateY", vec![-12.9, 60.0]),
        (AugmentOp::Rotate, "Rotate", vec![30.0, -16.666668, 3.3333333, 0.0]),
        (AugmentOp::Brightness, "Brightness", vec![0.9, -0.5]),
        (AugmentOp::Color, "Color", vec![0.79999995, -0.9, 0.0]),
        (AugmentOp::Contrast, "Contrast", vec![0.79999995, -0.6]),
        (AugmentOp::Sharpness, "Sharpness", vec![0.7, -0.9]),
        (AugmentOp::Posterize, "Posterize", vec![4.0, 6.0, 8.0]),
        (AugmentOp::Solarize, "Solarize", vec![113.333336, 0.0, 255.0]),
        (AugmentOp::AutoContrast, "AutoContrast", vec![0.0]),
        (AugmentOp::Equalize, "Equalize", vec![0.0]),
        (AugmentOp::Invert, "Invert", vec![0.0]),
        // RandAugment's and TrivialAugmentWide's: Identity, and the wider magnitudes.
        (AugmentOp::Identity, "Identity", vec![0.0]),
        (AugmentOp::ShearX, "ShearX", vec![0.99, -0.66]),
        (AugmentOp::ShearY, "ShearY", vec![-0.99]),
        (AugmentOp::TranslateX, "TranslateX", vec![32.0, -21.333334]),
        (AugmentOp::Rotate, "Rotate", vec![135.0, -90.0, 121.5]),
        (AugmentOp::Brightness, "Brightness", vec![-0.99, 0.99]),
        (AugmentOp::Color, "Color", vec![0.99]),
        (AugmentOp::Contrast, "Contrast", vec![-0.99]),
        (AugmentOp::Sharpness, "Sharpness", vec![0.99, -0.99]),
        (AugmentOp::Posterize, "Posterize", vec![2.0]),
    ];
    // The geometric operations with torchvision's other resamplings (PIL's generic transform).
    let geometric: Vec<(AugmentOp, &str, Vec<f32>)> = vec![
        (AugmentOp::ShearX, "ShearX", vec![0.3, -0.66]),
        (AugmentOp::ShearY, "ShearY", vec![-0.99, 0.2]),
        (AugmentOp::TranslateX, "TranslateX", vec![41.0, -21.333334]),
        (AugmentOp::TranslateY, "TranslateY", vec![-12.9]),
        (AugmentOp::Rotate, "Rotate", vec![30.0, -16.666668, 121.5, 180.0]),
    ];
    let resamplings = [(Interpolation::Bilinear, "bilinear"), (Interpolation::Bicubic, "bicubic")];

    let mut cases = Vec::new();
    for path in &images {
        let p = path.to_str().unwrap();
        cases.push(json!({"kind": "decode", "image": p}));
        for (steps, _, _) in &pipelines {
            cases.push(json!({"kind": "pipeline", "image": p, "steps": steps}));
        }
        for (_, name, mags) in &ops {
            for m in mags {
                cases.push(json!({"kind": "op", "image": p, "op": name, "magnitude": *m as f64}));
            }
        }
        for (_, mode) in &resamplings {
            for (_, name, mags) in &geometric {
                for m in mags {
                    cases.push(json!({"kind": "op", "image": p, "op": name,
                                      "magnitude": *m as f64, "interpolation": mode}));
                }
            }
        }
    }
    let shapes = run_oracle(&cases, &out);
    let read = |i: usize| std::fs::read(out.join(format!("case_{i}.bin"))).unwrap();

    let mut i = 0;
    let mut worst_pipeline = vec![0f32; pipelines.len()];
    for path in &images {
        // Decoding: bit-exact with PIL, PNG and JPEG (libjpeg-turbo on both sides).
        let pil = read(i);
        let ours = load_rgb(path).unwrap();
        assert_eq!(shapes[i], vec![ours.height() as usize, ours.width() as usize, 3]);
        let diff = ours.data().iter().zip(&pil).map(|(a, b)| a.abs_diff(*b)).max().unwrap();
        assert_eq!(diff, 0, "{}: decoded pixels differ from PIL's by up to {diff}", path.display());
        // The transforms start from PIL's pixels so that only the transforms are compared.
        let (w, h) = (ours.width(), ours.height());
        let base = Image::from_raw(w, h, 3, pil).unwrap();
        i += 1;
        for (k, (steps, pipeline, bar)) in pipelines.iter().enumerate() {
            let got = pipeline.apply_image(base.clone(), &mut aug_rng(0, 0, 0)).unwrap();
            assert_eq!(got.shape().to_vec(), shapes[i], "{} {steps}", path.display());
            let d = max_diff(&got.data, &f32s(&read(i)));
            assert!(d <= bar + 1e-6, "{} {steps}: max |diff| {d} > {bar}", path.display());
            worst_pipeline[k] = worst_pipeline[k].max(d);
            i += 1;
        }
        for (op, name, mags) in &ops {
            for m in mags {
                let got = op.apply(&base, *m);
                let want = read(i);
                let mismatched = got.data().iter().zip(&want).filter(|(a, b)| a != b).count();
                assert_eq!(
                    mismatched,
                    0,
                    "{} {name}({m}): {mismatched} bytes differ from torchvision",
                    path.display()
                );
                i += 1;
            }
        }
        for (interpolation, mode) in &resamplings {
            for (op, name, mags) in &geometric {
                for m in mags {
                    let got = op.apply_with(&base, *m, *interpolation);
                    let want = read(i);
                    let mismatched = got.data().iter().zip(&want).filter(|(a, b)| a != b).count();
                    assert_eq!(
                        mismatched,
                        0,
                        "{} {name}({m}, {mode}): {mismatched} bytes differ from torchvision",
                        path.display()
                    );
                    // The resampling matters for shears and rotations: NEAREST gives other
                    // bytes (translations move by whole pixels, and 180 degrees is a transpose).
                    let resampled = matches!(op, AugmentOp::ShearX | AugmentOp::ShearY)
                        || (*op == AugmentOp::Rotate && *m != 180.0);
                    if resampled {
                        assert_ne!(op.apply(&base, *m).data(), got.data(), "{name}({m}, {mode})");
                    }
                    i += 1;
                }
            }
        }
    }
    for ((steps, _, _), d) in pipelines.iter().zip(&worst_pipeline) {
        println!("{steps}: max |diff| vs torchvision {d:.6} ({:.3}/255)", d * 255.0);
    }
}

#[test]
fn rand_augment_and_trivial_augment_magnitudes_are_torchvisions_bit_for_bit() {
    let _turn = common::module_turn(module_path!());
    let dir = common::WorkDir::new("augment-spaces");
    let spaces = [
        (AugmentSpace::RandAugment, "RandAugment", 31, (224u32, 224u32)),
        (AugmentSpace::RandAugment, "RandAugment", 10, (97, 131)),
        (AugmentSpace::RandAugment, "RandAugment", 2, (33, 401)),
        (AugmentSpace::TrivialAugmentWide, "TrivialAugmentWide", 31, (224, 224)),
        (AugmentSpace::TrivialAugmentWide, "TrivialAugmentWide", 7, (317, 211)),
    ];
    let cases: Vec<Value> = spaces
        .iter()
        .map(|(_, name, bins, (w, h))| json!({"kind": "space", "transform": name, "bins": bins, "size": [h, w]}))
        .collect();
    let shapes = run_oracle(&cases, &dir);
    for (i, (space, name, bins, (w, h))) in spaces.iter().enumerate() {
        assert_eq!(shapes[i], vec![RAND_AUGMENT_OPS.len(), bins + 1], "{name}");
        let want = f32s(&std::fs::read(dir.join(format!("case_{i}.bin"))).unwrap());
        for (row, op) in RAND_AUGMENT_OPS.iter().enumerate() {
            let row_want = &want[row * (bins + 1)..(row + 1) * (bins + 1)];
            for bin in 0..*bins {
                let (m, signed) = space.magnitude(*op, *bins, bin, *w, *h);
                assert_eq!(
                    m.to_bits(),
                    row_want[bin].to_bits(),
                    "{name}({bins}) {op:?} bin {bin}: {m} vs {}",
                    row_want[bin]
                );
                assert_eq!(signed, row_want[*bins] == 1.0, "{name} {op:?} sign");
            }
        }
    }
}

#[test]
fn random_erasing_picks_torchvisions_box_for_torchs_draws() {
    let _turn = common::module_turn(module_path!());
    let configs = [
        (0.5f32, (0.02f32, 0.33f32), (0.3f32, 3.3f32), 224usize, 224usize),
        (1.0, (0.02, 0.33), (0.3, 3.3), 32, 48),
        (0.25, (0.1, 0.6), (0.5, 2.0), 17, 61),
        (1.0, (0.4, 1.0), (0.1, 10.0), 8, 8), // often no box fits in 10 tries
    ];
    let seeds: Vec<u64> = (0..300).collect();
    let input: Vec<Value> = configs
        .iter()
        .map(|(p, s, r, h, w)| json!({"p": p, "scale": [s.0, s.1], "ratio": [r.0, r.1], "height": h, "width": w, "seeds": seeds}))
        .collect();
    let mut child = Command::new(common::venv_bin("python"))
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oracle/erasing.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(Value::Array(input).to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "the torchvision oracle failed");
    let want: Vec<Vec<Option<[usize; 4]>>> = serde_json::from_slice(&out.stdout).unwrap();
    let mut erased = 0;
    for ((p, scale, ratio, h, w), want) in configs.iter().zip(&want) {
        let t = RandomErasing::with(*p, *scale, *ratio, EraseValue::Constant(vec![0.0])).unwrap();
        for (&seed, want) in seeds.iter().zip(want) {
            let got =
                t.decide(&mut TorchGenerator::new(seed), *h, *w).map(|(a, b, c, d)| [a, b, c, d]);
            assert_eq!(got, *want, "p {p} scale {scale:?} ratio {ratio:?} {h}x{w}, seed {seed}");
            erased += got.is_some() as usize;
        }
    }
    assert!(erased > 300, "only {erased} erased boxes compared");
}
