//! `ColorJitter` against torchvision's PIL functions (tests/oracle/color_jitter.py): for the
//! same order and factors the same bytes, on every one of the 2^24 RGB colours for the hue
//! (PIL's HSV round trip and its shift) and on noise pictures for whole jitters; the draws
//! cover the 24 orders evenly and stay in their ranges; bad ranges are errors naming them.
use crate::common;

use std::process::Command;

use rand::SeedableRng;
use trainbook::transforms::{AugRng, ColorJitter, Image, JitterDraw};

/// Runs the oracle on `cases` (each an image name and a draw) and returns its output bytes.
fn torchvision(dir: &std::path::Path, cases: &[(&str, &Image, JitterDraw)]) -> Vec<Vec<u8>> {
    let json: Vec<serde_json::Value> = cases
        .iter()
        .map(|(name, img, d)| {
            std::fs::write(dir.join(format!("{name}.rgb")), img.data()).unwrap();
            serde_json::json!({
                "image": name, "width": img.width(), "height": img.height(),
                "order": d.order, "brightness": d.brightness.map(f64::from),
                "contrast": d.contrast.map(f64::from), "saturation": d.saturation.map(f64::from),
                "hue": d.hue.map(f64::from),
            })
        })
        .collect();
    std::fs::write(dir.join("cases.json"), serde_json::to_string(&json).unwrap()).unwrap();
    let out = Command::new(common::venv_bin("python"))
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oracle/color_jitter.py"))
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (0..cases.len()).map(|k| std::fs::read(dir.join(format!("out_{k}.rgb"))).unwrap()).collect()
}

fn hue_only(h: f32) -> JitterDraw {
    JitterDraw {
        order: [3, 0, 1, 2],
        brightness: None,
        contrast: None,
        saturation: None,
        hue: Some(h),
    }
}

#[test]
fn every_colour_shifts_in_hue_as_pil_does() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("jitter-hue");
    // All 2^24 colours, one per pixel of a 4096 x 4096 picture.
    let data: Vec<u8> =
        (0..1u32 << 24).flat_map(|c| [(c >> 16) as u8, (c >> 8) as u8, c as u8]).collect();
    let all = Image::from_raw(4096, 4096, 3, data).unwrap();
    let shifts = [0.0f32, -0.27, 0.5];
    let cases: Vec<_> = shifts.iter().map(|&h| ("all", &all, hue_only(h))).collect();
    let theirs = torchvision(&work, &cases);
    for ((_, img, draw), want) in cases.iter().zip(&theirs) {
        let ours = ColorJitter::apply_draw(img, draw);
        let differ = ours.data().iter().zip(want).filter(|(a, b)| a != b).count();
        assert_eq!(differ, 0, "hue {:?}: {differ} bytes differ", draw.hue);
    }
}

#[test]
fn whole_jitters_match_torchvision_for_the_same_draws() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("jitter-draws");
    let mut rng = AugRng::seed_from_u64(7);
    let noise: Vec<u8> = (0..40 * 30 * 3).map(|_| rand::Rng::random(&mut rng)).collect();
    let noise = Image::from_raw(40, 30, 3, noise).unwrap();
    let jitter = ColorJitter::new(0.8, 0.8, 0.8, 0.5).unwrap();
    let mut cases = Vec::new();
    for _ in 0..24 {
        cases.push(("noise", &noise, jitter.draw(&mut rng)));
    }
    // Extremes: black, the mean grey, grey, and the most saturated.
    let extreme = JitterDraw {
        order: [2, 1, 0, 3],
        brightness: Some(0.0),
        contrast: Some(1.8),
        saturation: Some(0.0),
        hue: Some(-0.5),
    };
    cases.push(("noise", &noise, extreme));
    let theirs = torchvision(&work, &cases);
    for (k, ((_, img, draw), want)) in cases.iter().zip(&theirs).enumerate() {
        let ours = ColorJitter::apply_draw(img, draw);
        assert!(ours.data() == &want[..], "case {k}: {draw:?}");
    }
}

#[test]
fn the_draws_cover_every_order_and_stay_in_their_ranges() {
    let _turn = common::module_turn(module_path!());
    let jitter = ColorJitter::with_ranges((0.5, 1.5), (1.0, 1.0), (0.2, 0.3), (-0.1, 0.4)).unwrap();
    let mut rng = AugRng::seed_from_u64(1);
    const N: usize = 24_000;
    let mut orders = std::collections::HashMap::new();
    let mut sum = 0.0f64;
    for _ in 0..N {
        let d = jitter.draw(&mut rng);
        *orders.entry(d.order).or_insert(0usize) += 1;
        assert!(d.contrast.is_none(), "contrast (1, 1) is off");
        let b = d.brightness.unwrap();
        assert!((0.5..1.5).contains(&b) && (0.2..0.3).contains(&d.saturation.unwrap()));
        assert!((-0.1..0.4).contains(&d.hue.unwrap()));
        sum += b as f64;
    }
    // 24 orders, each with chance 1/24: every count within 5 standard deviations.
    let (p, n) = (1.0 / 24.0, N as f64);
    let sd = (n * p * (1.0 - p)).sqrt();
    assert_eq!(orders.len(), 24);
    assert!(orders.values().all(|&c| (c as f64 - n * p).abs() < 5.0 * sd), "{orders:?}");
    // The brightness mean: uniform on [0.5, 1.5), standard deviation 1/sqrt(12) per draw.
    let mean_sd = (1.0f64 / 12.0).sqrt() / n.sqrt();
    assert!((sum / n - 1.0).abs() < 5.0 * mean_sd, "mean {}", sum / n);
}

#[test]
fn bad_ranges_are_errors_naming_them() {
    let _turn = common::module_turn(module_path!());
    let err = ColorJitter::new(-0.1, 0.0, 0.0, 0.0).unwrap_err().to_string();
    assert!(err.contains("brightness -0.1"), "{err}");
    let err = ColorJitter::new(0.0, 0.0, 0.0, 0.6).unwrap_err().to_string();
    assert!(err.contains("hue") && err.contains("0.5"), "{err}");
    let err = ColorJitter::with_ranges((1.2, 0.8), (1.0, 1.0), (1.0, 1.0), (0.0, 0.0));
    assert!(err.unwrap_err().to_string().contains("brightness (1.2, 0.8)"));
    let none = ColorJitter::new(0.0, 0.0, 0.0, 0.0).unwrap();
    let d = none.draw(&mut AugRng::seed_from_u64(0));
    assert_eq!((d.brightness, d.contrast, d.saturation, d.hue), (None, None, None, None));
}
