//! The draws' distribution (the pixels for given draws are checked against torchvision in
//! tests/parity/transforms_parity.rs, and the magnitude tables in the same file).
use super::*;
use crate::transforms::aug_rng;

/// Pearson's chi-square statistic of `counts` against a uniform distribution.
fn chi_square(counts: &[u64]) -> f64 {
    let n: u64 = counts.iter().sum();
    let expected = n as f64 / counts.len() as f64;
    counts.iter().map(|&c| (c as f64 - expected).powi(2) / expected).sum()
}

#[test]
fn draws_are_uniform_over_ops_bins_and_signs() {
    // 99.9% quantiles of chi-square: 13 degrees of freedom 34.53, 30 of them 59.70, 1 of them
    // 10.83. The streams are fixed (ChaCha8 keyed by seed, epoch, index), so the counts are
    // the same on every machine; the bounds say that they look uniform.
    let (mut ops, mut bins, mut signs) = ([0u64; 14], [0u64; 31], [0u64; 2]);
    for index in 0..20_000 {
        let mut rng = aug_rng(11, 0, index);
        let op = rng.random_range(0..RAND_AUGMENT_OPS.len());
        let bin = rng.random_range(0..31);
        let sign = rng.random::<bool>();
        ops[op] += 1;
        bins[bin] += 1;
        signs[sign as usize] += 1;
    }
    assert!(chi_square(&ops) < 34.53, "ops {ops:?}");
    assert!(chi_square(&bins) < 59.70, "bins {bins:?}");
    assert!(chi_square(&signs) < 10.83, "signs {signs:?}");
}

#[test]
fn a_transform_applies_what_it_draws() {
    let img = Image::from_raw(16, 12, 3, (0..16 * 12 * 3).map(|i| (i * 37 % 251) as u8).collect())
        .unwrap();
    let ta = TrivialAugmentWide::default();
    let ra = RandAugment::default();
    for index in 0..200 {
        let mut rng = aug_rng(3, 1, index);
        let got = ta.apply_image(img.clone(), &mut rng).unwrap();
        let mut again = aug_rng(3, 1, index);
        let op = RAND_AUGMENT_OPS[again.random_range(0..14)];
        let bin = again.random_range(0..31);
        let want = ta.apply_draws(img.clone(), &[(op, bin, again.random::<bool>())]);
        assert_eq!(got.data(), want.data(), "TrivialAugmentWide, sample {index}");

        let got = ra.apply_image(img.clone(), &mut aug_rng(4, 1, index)).unwrap();
        let mut again = aug_rng(4, 1, index);
        let draws: Vec<_> = (0..2)
            .map(|_| (RAND_AUGMENT_OPS[again.random_range(0..14)], 9, again.random::<bool>()))
            .collect();
        assert_eq!(got.data(), ra.apply_draws(img.clone(), &draws).data(), "RandAugment {index}");
    }
}

#[test]
fn bad_arguments_are_errors() {
    assert!(RandAugment::new(2, 31, 31).unwrap_err().to_string().contains("magnitude"));
    assert!(RandAugment::new(2, 0, 1).unwrap_err().to_string().contains("num_magnitude_bins"));
    assert!(TrivialAugmentWide::new(0).is_err());
    assert_eq!(RandAugment::new(2, 9, 31).unwrap(), RandAugment::default());
}
