//! `RandomResizedCrop` and `RandomHorizontalFlip` against torchvision (tests/oracle/random_crop.py,
//! the venv's torchvision as oracle), on noisy pictures with sharp colour edges that the oracle
//! generates with numpy:
//! - crop + resize equals `F.resized_crop(pil, top, left, h, w, size, antialias=True)` within
//!   1/255 for given boxes and for the boxes the transform draws itself (odd sizes, up- and
//!   downscaling, 1-pixel-wide crops, scale and ratio extremes). The transforms work on images
//!   (torchvision's PIL path); on tensors they are an error;
//! - the crop parameters equal `RandomResizedCrop.get_params` itself when both are fed the same
//!   uniform draws (torch's RNG calls replaced in the oracle), including the centre-crop
//!   fallback, and draw for draw the same number of draws;
//! - over 20,000 draws from each side's own generator, the area fraction, log aspect ratio and
//!   horizontal position have the same distribution (two-sample Kolmogorov-Smirnov bound);
//! - the flip is torchvision's `hflip` byte for byte, never at p=0, always at p=1, and at
//!   p=0.5 flips a binomial share of samples.
use crate::common;

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use rand::Rng;
use serde_json::{json, Value};
use trainbook::transforms::{
    aug_rng, resize_bilinear, Image, ImageTransform, RandomHorizontalFlip, RandomResizedCrop,
    Sample, Transform,
};

/// Source pictures `(width, height, seed)`: odd sizes, a tall strip, a square.
const IMAGES: [(u32, u32, u64); 5] =
    [(317, 211, 1), (640, 479, 2), (97, 131, 3), (33, 401, 4), (256, 256, 5)];
const DEFAULT_RATIO: (f64, f64) = (3.0 / 4.0, 4.0 / 3.0);
/// Draws per side in the distribution test.
const N_STAT: usize = 20_000;

enum Case {
    /// Crop `bbox` (top, left, h, w) of picture `img`, resize to `size` (h, w); `rrc`: the box
    /// was drawn by this transform from `aug_rng(7, 0, seed)`, and its output is compared.
    Crop {
        img: usize,
        bbox: [u32; 4],
        size: (u32, u32),
        rrc: Option<(RandomResizedCrop, u64)>,
    },
    Flip {
        img: usize,
    },
    Fixed {
        size: (u32, u32),
        scale: (f64, f64),
        ratio: (f64, f64),
        draws: Vec<f64>,
    },
    Random {
        size: (u32, u32),
        scale: (f64, f64),
        ratio: (f64, f64),
        n: usize,
    },
}

fn rrc(size: (u32, u32), scale: (f64, f64), ratio: (f64, f64)) -> RandomResizedCrop {
    RandomResizedCrop::new(size).scale(scale.0, scale.1).ratio(ratio.0, ratio.1)
}

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (img, &(w, h, _)) in IMAGES.iter().enumerate() {
        let boxes = [
            ([0, 0, h, w], (224, 224)),
            ([h / 4, w / 3, h / 2, w / 3], (57, 31)),
            ([1, 2, 9, 13], (224, 224)),
            ([0, w / 2, h, 1], (32, 32)),
            ([h - 3, 0, 3, w], (17, 23)),
            ([h / 5, w / 5, 29, 31], (29, 31)),
        ];
        cases.extend(boxes.map(|(bbox, size)| Case::Crop { img, bbox, size, rrc: None }));
        let draws = [
            ((0.08, 1.0), DEFAULT_RATIO, (224, 224)),
            ((0.005, 0.01), DEFAULT_RATIO, (37, 53)),
            ((1.0, 1.0), (0.2, 5.0), (64, 64)),
            ((0.5, 1.0), (0.1, 10.0), (224, 224)),
        ];
        for (k, (scale, ratio, size)) in draws.into_iter().enumerate() {
            let t = rrc(size, scale, ratio);
            let seed = (img * 10 + k) as u64;
            let bbox = t.params(w, h, &mut aug_rng(7, 0, seed));
            let bbox = [bbox.0, bbox.1, bbox.2, bbox.3];
            cases.push(Case::Crop { img, bbox, size, rrc: Some((t, seed)) });
        }
        cases.push(Case::Flip { img });
    }
    let sizes = [(500, 375), (33, 401), (640, 200), (1000, 10), (7, 5), (224, 224)];
    let params = [
        ((0.08, 1.0), DEFAULT_RATIO),
        ((0.9, 1.0), (0.1, 0.2)),
        ((0.5, 1.0), (0.5, 2.0)),
        ((1.0, 1.0), DEFAULT_RATIO),
        ((0.08, 1.0), (5.0, 10.0)),
        ((0.01, 0.02), (0.2, 5.0)),
    ];
    for (c, &size) in sizes.iter().enumerate() {
        for (p, &(scale, ratio)) in params.iter().enumerate() {
            for k in 0..5 {
                let mut rng = aug_rng(3, (c * 10 + p) as u64, k);
                let draws = (0..24).map(|_| rng.random::<f64>()).collect();
                cases.push(Case::Fixed { size, scale, ratio, draws });
            }
        }
    }
    // The fallback, taken on every draw: no crop of the ratio range fits.
    for (size, scale, ratio) in [
        ((1000, 10), (0.08, 1.0), DEFAULT_RATIO),
        ((10, 1000), (0.08, 1.0), DEFAULT_RATIO),
        ((300, 300), (0.9, 1.0), (5.0, 10.0)),
    ] {
        cases.push(Case::Random { size, scale, ratio, n: 50 });
    }
    for (size, scale, ratio) in STAT_CONFIGS {
        cases.push(Case::Random { size, scale, ratio, n: N_STAT });
    }
    cases
}

type Config = ((u32, u32), (f64, f64), (f64, f64));
const STAT_CONFIGS: [Config; 3] = [
    ((500, 375), (0.08, 1.0), DEFAULT_RATIO),
    ((640, 200), (0.5, 1.0), (0.5, 2.0)),
    ((31, 17), (0.08, 1.0), DEFAULT_RATIO),
];

fn to_json(case: &Case) -> Value {
    match case {
        Case::Crop { img, bbox, size, .. } => {
            let (w, h, s) = IMAGES[*img];
            json!({"kind": "resized_crop", "image": [w, h, s], "box": bbox,
                "size": [size.0, size.1]})
        }
        Case::Flip { img } => json!({"kind": "hflip", "image": IMAGES[*img]}),
        Case::Fixed { size, scale, ratio, draws } => json!({"kind": "params_fixed",
            "size": [size.0, size.1], "scale": [scale.0, scale.1], "ratio": [ratio.0, ratio.1],
            "draws": draws}),
        Case::Random { size, scale, ratio, n } => json!({"kind": "params_random",
            "size": [size.0, size.1], "scale": [scale.0, scale.1], "ratio": [ratio.0, ratio.1],
            "n": n, "seed": 0}),
    }
}

/// One oracle run for all the tests of this module: each case's JSON result and, for image cases,
/// the source picture and torchvision's output.
struct Oracle {
    results: Vec<Value>,
    images: Vec<Option<(Vec<u8>, Vec<u8>)>>,
}

fn oracle() -> &'static Oracle {
    static ORACLE: OnceLock<Oracle> = OnceLock::new();
    ORACLE.get_or_init(|| {
        let dir = common::WorkDir::new("random-crop");
        let cases: Vec<Value> = cases().iter().map(to_json).collect();
        let mut child = Command::new(common::venv_bin("python"))
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oracle/random_crop.py"))
            .arg(&*dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(Value::Array(cases).to_string().as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "oracle failed");
        let results: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
        let images = (0..results.len())
            .map(|i| {
                let read = |name: &str| std::fs::read(dir.join(format!("{name}_{i}.bin"))).ok();
                Some((read("src")?, read("case")?))
            })
            .collect();
        Oracle { results, images }
    })
}

fn source(img: usize, bytes: &[u8]) -> Image {
    let (w, h, _) = IMAGES[img];
    Image::from_raw(w, h, 3, bytes.to_vec()).unwrap()
}

#[test]
fn resized_crop_matches_torchvision_within_one_level() {
    let _turn = common::module_turn(module_path!());
    let oracle = oracle();
    let (mut worst, mut compared) = (0u8, 0);
    for (i, case) in cases().iter().enumerate() {
        let Case::Crop { img, bbox: [top, left, h, w], size, rrc } = case else { continue };
        let (src, want) = oracle.images[i].as_ref().unwrap();
        let src = source(*img, src);
        let got = match rrc {
            Some((t, seed)) => t.apply_image(src.clone(), &mut aug_rng(7, 0, *seed)).unwrap(),
            None => resize_bilinear(src.crop(*left as i64, *top as i64, *w, *h), size.1, size.0)
                .unwrap(),
        };
        let what = format!("image {:?} box {:?} -> {size:?}", IMAGES[*img], [top, left, h, w]);
        assert_eq!(oracle.results[i], json!([size.0, size.1, 3]), "{what}: shape");
        assert_eq!((got.height(), got.width()), *size, "{what}: shape");
        let diff = got.data().iter().zip(want).map(|(a, b)| a.abs_diff(*b)).max().unwrap();
        assert!(diff <= 1, "{what}: differs from torchvision's resized_crop by {diff}/255");
        worst = worst.max(diff);
        compared += 1;
    }
    assert_eq!(compared, IMAGES.len() * 10);
    println!("{compared} crops: max |diff| vs F.resized_crop {worst}/255");
    // Image transforms only (torchvision's PIL path): a tensor is refused.
    let t = trainbook::transforms::TensorImage::from_image(&Image::zeros(4, 4, 3));
    assert!(RandomResizedCrop::new(2).apply(Sample::Tensor(t), &mut aug_rng(0, 0, 0)).is_err());
}

#[test]
fn params_equal_torchvisions_get_params_for_the_same_draws() {
    let _turn = common::module_turn(module_path!());
    let oracle = oracle();
    let (mut fallbacks, mut retried, mut total) = (0, 0, 0);
    for (i, case) in cases().iter().enumerate() {
        let Case::Fixed { size, scale, ratio, draws } = case else { continue };
        let mut used = 0;
        let got = rrc((8, 8), *scale, *ratio).params_from_uniform(size.0, size.1, || {
            used += 1;
            draws[used - 1]
        });
        let got = json!([got.0, got.1, got.2, got.3, used]);
        assert_eq!(got, oracle.results[i], "{size:?} scale {scale:?} ratio {ratio:?}");
        fallbacks += (used == 20) as usize;
        retried += (used > 4 && used < 20) as usize;
        total += 1;
    }
    assert!(fallbacks >= 20 && retried >= 20, "{fallbacks} fallbacks, {retried} retried");
    println!(
        "{total} draw sequences: same boxes ({fallbacks} fallbacks, {retried} after rejections)"
    );
}

#[test]
fn fallback_is_torchvisions_centre_crop() {
    let _turn = common::module_turn(module_path!());
    let oracle = oracle();
    for (i, case) in cases().iter().enumerate() {
        let Case::Random { size, scale, ratio, n: 50 } = case else { continue };
        let t = rrc((8, 8), *scale, *ratio);
        let want: Vec<[u32; 4]> = serde_json::from_value(oracle.results[i].clone()).unwrap();
        assert!(want.iter().all(|b| *b == want[0]), "torchvision: one fallback box");
        for seed in 0..50 {
            let (top, left, h, w) = t.params(size.0, size.1, &mut aug_rng(1, 0, seed));
            assert_eq!([top, left, h, w], want[0], "{size:?} scale {scale:?} ratio {ratio:?}");
        }
        println!("{size:?} ratio {ratio:?}: fallback {:?} as torchvision", want[0]);
    }
}

/// Two-sample Kolmogorov-Smirnov statistic `sup |F_a - F_b|` (exact with ties); also
/// `mix_parity`'s.
pub(crate) fn ks(mut a: Vec<f64>, mut b: Vec<f64>) -> f64 {
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    let (mut i, mut j, mut d) = (0, 0, 0.0f64);
    while i < a.len() && j < b.len() {
        let x = a[i].min(b[j]);
        while i < a.len() && a[i] <= x {
            i += 1;
        }
        while j < b.len() && b[j] <= x {
            j += 1;
        }
        d = d.max((i as f64 / a.len() as f64 - j as f64 / b.len() as f64).abs());
    }
    d
}

#[test]
fn param_distribution_matches_torchvision() {
    let _turn = common::module_turn(module_path!());
    let oracle = oracle();
    let n = N_STAT as f64;
    // Under equal distributions P(D > c * sqrt(2/n)) <= 2 exp(-2 c^2) (asymptotic two-sample
    // KS; conservative for discrete distributions like these integer boxes). Per comparison
    // alpha = 1e-6 gives c = sqrt(ln(2 / alpha) / 2) = 2.69 and a bound of 0.027 at n = 20,000;
    // 9 comparisons: a false failure has probability below 1e-5.
    let alpha: f64 = 1e-6;
    let bound = (-(alpha / 2.0).ln() / 2.0).sqrt() * (2.0 / n).sqrt();
    let stats = |boxes: &[[u32; 4]], (w_img, h_img): (u32, u32)| {
        let area = |b: &[u32; 4]| (b[2] * b[3]) as f64 / (w_img * h_img) as f64;
        let log_ratio = |b: &[u32; 4]| (b[3] as f64 / b[2] as f64).ln();
        let x = |b: &[u32; 4]| (b[1] as f64 + 0.5) / (w_img - b[3] + 1) as f64;
        [
            boxes.iter().map(area).collect(),
            boxes.iter().map(log_ratio).collect(),
            boxes.iter().map(x).collect::<Vec<f64>>(),
        ]
    };
    let mut checked = 0;
    for (i, case) in cases().iter().enumerate() {
        let Case::Random { size, scale, ratio, n: N_STAT } = case else { continue };
        let want: Vec<[u32; 4]> = serde_json::from_value(oracle.results[i].clone()).unwrap();
        let t = rrc((8, 8), *scale, *ratio);
        let got: Vec<[u32; 4]> = (0..N_STAT as u64)
            .map(|k| {
                let (top, left, h, w) = t.params(size.0, size.1, &mut aug_rng(5, 0, k));
                [top, left, h, w]
            })
            .collect();
        for (name, (a, b)) in ["area fraction", "log ratio", "left position"]
            .iter()
            .zip(stats(&got, *size).into_iter().zip(stats(&want, *size)))
        {
            let d = ks(a, b);
            println!(
                "{size:?} scale {scale:?} ratio {ratio:?} {name}: KS {d:.4} (bound {bound:.4})"
            );
            assert!(d <= bound, "{size:?} {name}: KS statistic {d} > {bound}");
            checked += 1;
        }
    }
    assert_eq!(checked, 9);
}

#[test]
fn horizontal_flip_is_torchvisions_hflip_with_probability_p() {
    let _turn = common::module_turn(module_path!());
    let oracle = oracle();
    for (i, case) in cases().iter().enumerate() {
        let Case::Flip { img } = case else { continue };
        let (src, want) = oracle.images[i].as_ref().unwrap();
        let src = source(*img, src);
        for seed in 0..200 {
            let mut rng = aug_rng(2, 0, seed);
            let never = RandomHorizontalFlip::new(0.0).apply_image(src.clone(), &mut rng).unwrap();
            assert_eq!(never.data(), src.data(), "p=0 flipped");
            let always = RandomHorizontalFlip::new(1.0).apply_image(src.clone(), &mut rng).unwrap();
            assert!(
                always.data() == &want[..],
                "{:?}: p=1 is not torchvision's hflip",
                IMAGES[*img]
            );
        }
    }
    // p = 0.5 over n samples: the flip count is Binomial(n, 1/2), sd sqrt(n)/2; |k - n/2| above
    // 5.33 sd has probability below 1e-7.
    let n = 20_000u64;
    let pair = Image::from_raw(2, 1, 1, vec![0, 1]).unwrap();
    let flips = (0..n)
        .filter(|&k| {
            let out =
                RandomHorizontalFlip::default().apply_image(pair.clone(), &mut aug_rng(9, 1, k));
            out.unwrap().data()[0] == 1
        })
        .count() as f64;
    let bound = 5.33 * (n as f64).sqrt() / 2.0;
    println!("p=0.5: {flips} flips of {n} (bound n/2 +- {bound:.0})");
    assert!((flips - n as f64 / 2.0).abs() <= bound, "{flips} flips of {n}");
}
