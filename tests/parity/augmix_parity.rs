//! `AugMix` against torchvision's (tests/oracle/augmix.py replays trainbook's draws through
//! torchvision's `AugMix`: its two Dirichlet draws and every `torch.randint` it calls): for the
//! same draws the same bytes, for every operation alone at every bin and sign, and for whole
//! draws at the default and the largest severity, fixed and random chain depths, without the
//! enhancements, NEAREST and BILINEAR, RGB and grey pictures; the draws follow torchvision's
//! distributions; bad settings are errors naming them.
use crate::common;

use std::path::Path;
use std::process::Command;

use rand::SeedableRng;
use trainbook::transforms::{
    AugMix, AugMixDraw, AugMixStep, AugRng, AugmentOp, Image, Interpolation, AUGMIX_OPS,
};

/// torchvision's table: whether an operation draws a magnitude bin, and whether it draws a sign.
fn draws_bin_and_sign(op: AugmentOp) -> (bool, bool) {
    match op {
        AugmentOp::AutoContrast | AugmentOp::Equalize => (false, false),
        AugmentOp::Posterize | AugmentOp::Solarize => (true, false),
        _ => (true, true),
    }
}

/// One application: the picture, AugMix's settings as torchvision takes them, and the draws.
struct Case<'a> {
    name: &'a str,
    img: &'a Image,
    severity: usize,
    chain_depth: i64,
    all_ops: bool,
    nearest: bool,
    draw: AugMixDraw,
}

impl Case<'_> {
    fn augmix(&self) -> AugMix {
        let interpolation =
            if self.nearest { Interpolation::Nearest } else { Interpolation::Bilinear };
        let k = self.draw.mixing.len();
        AugMix::new(self.severity, k, self.chain_depth, 1.0)
            .unwrap()
            .all_ops(self.all_ops)
            .interpolation(interpolation)
            .unwrap()
    }

    /// What torchvision's `torch.randint` calls return for these draws, in its order.
    fn randint(&self) -> Vec<i64> {
        let mut values = Vec::new();
        for chain in &self.draw.chains {
            if self.chain_depth <= 0 {
                values.push(chain.len() as i64);
            }
            for step in chain {
                values.push(AUGMIX_OPS.iter().position(|&op| op == step.op).unwrap() as i64);
                let (bin, sign) = draws_bin_and_sign(step.op);
                if bin {
                    values.push(step.bin as i64);
                }
                if sign {
                    values.push(step.negate as i64);
                }
            }
        }
        values
    }
}

/// Runs the oracle on `cases` and returns torchvision's output bytes.
fn torchvision(dir: &Path, cases: &[Case]) -> Vec<Vec<u8>> {
    let json: Vec<serde_json::Value> = cases
        .iter()
        .map(|c| {
            std::fs::write(dir.join(format!("{}.raw", c.name)), c.img.data()).unwrap();
            serde_json::json!({
                "image": c.name, "width": c.img.width(), "height": c.img.height(),
                "channels": c.img.channels(), "severity": c.severity,
                "mixture_width": c.draw.mixing.len(), "chain_depth": c.chain_depth,
                "all_ops": c.all_ops, "interpolation": if c.nearest { "nearest" } else { "bilinear" },
                "beta": c.draw.beta.map(f64::from), "mixing": c.draw.mixing.iter().map(|&w| w as f64).collect::<Vec<_>>(),
                "randint": c.randint(),
            })
        })
        .collect();
    std::fs::write(dir.join("cases.json"), serde_json::to_string(&json).unwrap()).unwrap();
    let out = Command::new(common::venv_bin("python"))
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oracle/augmix.py"))
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (0..cases.len()).map(|k| std::fs::read(dir.join(format!("out_{k}.raw"))).unwrap()).collect()
}

/// Deterministic noise with a few flat blocks (so that histograms and contrasts vary).
fn noise(width: u32, height: u32, channels: u8, seed: u64) -> Image {
    let mut rng = AugRng::seed_from_u64(seed);
    let mut data: Vec<u8> =
        (0..width * height * channels as u32).map(|_| rand::Rng::random::<u8>(&mut rng)).collect();
    for (i, v) in data.iter_mut().enumerate() {
        if (i / (channels as usize * 5)) % 7 == 0 {
            *v = *v / 3 + 40;
        }
    }
    Image::from_raw(width, height, channels, data).unwrap()
}

fn assert_same(cases: &[Case], dir: &Path) {
    let theirs = torchvision(dir, cases);
    for (k, (case, want)) in cases.iter().zip(&theirs).enumerate() {
        let ours = case.augmix().apply_draw(case.img, &case.draw).unwrap();
        let differ = ours.data().iter().zip(want).filter(|(a, b)| a != b).count();
        assert!(
            ours.data().len() == want.len() && differ == 0,
            "case {k} ({}): {differ} of {} bytes differ; draw {:?}",
            case.name,
            want.len(),
            case.draw
        );
    }
}

#[test]
fn every_operation_at_every_bin_matches_torchvision() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("augmix-ops");
    let (rgb, grey, tiny) = (noise(37, 29, 3, 1), noise(31, 17, 1, 2), noise(2, 3, 3, 3));
    let mut cases = Vec::new();
    // One chain of one operation, all the weight on it: the output is the operation's.
    for (name, img) in [("rgb", &rgb), ("grey", &grey), ("tiny", &tiny)] {
        for &op in &AUGMIX_OPS {
            let (bins, signs) = match draws_bin_and_sign(op) {
                (false, _) => (1, 1),
                (true, false) => (10, 1),
                (true, true) => (10, 2),
            };
            for bin in 0..bins {
                for nearest in [false, true] {
                    for sign in 0..signs {
                        let step = AugMixStep { op, bin, negate: sign == 1 };
                        let draw = AugMixDraw {
                            beta: [0.0, 1.0],
                            mixing: vec![1.0],
                            chains: vec![vec![step]],
                        };
                        cases.push(Case {
                            name,
                            img,
                            severity: 10,
                            chain_depth: 1,
                            all_ops: true,
                            nearest,
                            draw,
                        });
                    }
                }
            }
        }
    }
    assert_same(&cases, &work);
}

#[test]
fn whole_draws_match_torchvision() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("augmix-draws");
    let (rgb, grey) = (noise(40, 32, 3, 4), noise(23, 41, 1, 5));
    let mut rng = AugRng::seed_from_u64(11);
    let mut cases = Vec::new();
    // (severity, chain_depth, all_ops, nearest, picture, how many)
    let settings = [
        (3, -1, true, false, "rgb", 30),
        (10, -1, true, false, "rgb", 15),
        (10, 2, true, true, "rgb", 10),
        (5, -1, false, true, "rgb", 10),
        (3, -1, true, false, "grey", 10),
    ];
    for (severity, chain_depth, all_ops, nearest, picture, n) in settings {
        let img = if picture == "rgb" { &rgb } else { &grey };
        let augmix = AugMix::new(severity, 3, chain_depth, 1.0).unwrap().all_ops(all_ops);
        for _ in 0..n {
            let draw = augmix.draw(&mut rng);
            cases.push(Case { name: picture, img, severity, chain_depth, all_ops, nearest, draw });
        }
    }
    assert_same(&cases, &work);
}

#[test]
fn the_draws_follow_torchvisions_distributions() {
    let _turn = common::module_turn(module_path!());
    let augmix = AugMix::default();
    let mut rng = AugRng::seed_from_u64(5);
    const N: usize = 20_000;
    let (mut ops, mut depths, mut bins) = ([0usize; 13], [0usize; 3], [0usize; 3]);
    let (mut steps, mut negated, mut beta0, mut mix0) = (0usize, 0usize, 0.0f64, 0.0f64);
    for _ in 0..N {
        let d = augmix.draw(&mut rng);
        assert!((d.beta[0] + d.beta[1] - 1.0).abs() < 1e-6 && d.beta.iter().all(|&w| w >= 0.0));
        assert!((d.mixing.iter().sum::<f32>() - 1.0).abs() < 1e-6 && d.mixing.len() == 3);
        beta0 += d.beta[0] as f64;
        mix0 += d.mixing[0] as f64;
        for chain in &d.chains {
            depths[chain.len() - 1] += 1;
            for s in chain {
                ops[AUGMIX_OPS.iter().position(|&o| o == s.op).unwrap()] += 1;
                bins[s.bin] += 1;
                negated += s.negate as usize;
                steps += 1;
            }
        }
    }
    // Counts of uniform choices: each within 5 binomial standard deviations.
    let within = |count: usize, n: usize, p: f64| {
        let (n, c) = (n as f64, count as f64);
        (c - n * p).abs() < 5.0 * (n * p * (1.0 - p)).sqrt()
    };
    assert!(ops.iter().all(|&c| within(c, steps, 1.0 / 13.0)), "operations {ops:?}");
    assert!(depths.iter().all(|&c| within(c, 3 * N, 1.0 / 3.0)), "depths {depths:?}");
    assert!(bins.iter().all(|&c| within(c, steps, 1.0 / 3.0)), "bins {bins:?}");
    assert!(within(negated, steps, 0.5), "{negated} of {steps} negated");
    // Beta(1, 1) is uniform (sd 1/sqrt(12)); a Dirichlet(1, 1, 1) weight is Beta(1, 2)
    // (mean 1/3, variance 1/18): the means within 5 standard errors.
    let n = N as f64;
    assert!((beta0 / n - 0.5).abs() < 5.0 * (1.0 / 12.0f64).sqrt() / n.sqrt(), "{}", beta0 / n);
    assert!((mix0 / n - 1.0 / 3.0).abs() < 5.0 * (1.0 / 18.0f64).sqrt() / n.sqrt(), "{}", mix0 / n);
}

#[test]
fn bad_settings_and_draws_are_errors_naming_them() {
    let _turn = common::module_turn(module_path!());
    let message = |r: trainbook::Result<AugMix>| r.unwrap_err().to_string();
    assert!(message(AugMix::new(0, 3, -1, 1.0)).contains("severity"));
    assert!(message(AugMix::new(11, 3, -1, 1.0)).contains("got 11"));
    assert!(message(AugMix::new(3, 0, -1, 1.0)).contains("mixture_width"));
    assert!(message(AugMix::new(3, 3, -1, 0.0)).contains("alpha"));
    assert!(message(AugMix::new(3, 3, -1, f64::NAN)).contains("alpha"));
    assert!(message(AugMix::default().interpolation(Interpolation::Bicubic)).contains("BILINEAR"));
    let img = noise(8, 8, 3, 6);
    let step = AugMixStep { op: AugmentOp::Rotate, bin: 2, negate: false };
    let two_chains =
        AugMixDraw { beta: [0.5, 0.5], mixing: vec![1.0], chains: vec![vec![step]; 2] };
    let err = AugMix::default().apply_draw(&img, &two_chains).unwrap_err().to_string();
    assert!(err.contains("2 chains but 1 mixing weights"), "{err}");
    for bad in [AugMixStep { bin: 10, ..step }, AugMixStep { op: AugmentOp::Invert, ..step }] {
        let draw = AugMixDraw { beta: [0.5, 0.5], mixing: vec![1.0], chains: vec![vec![bad]] };
        let err = AugMix::default().apply_draw(&img, &draw).unwrap_err().to_string();
        assert!(err.contains(&format!("{:?} at bin {}", bad.op, bad.bin)), "{err}");
    }
}
