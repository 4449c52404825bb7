//! `WeightedRandomSampler` against torch's (tests/oracle/split.py): the same indices for the
//! same seed, epoch after epoch in any order of visits, and a loader batching them in order.
use crate::common;
use crate::data_split::{as_indices, numbered, oracle};

use serde_json::json;
use trainbook::data::{DataLoader, WeightedRandomSampler};

#[test]
fn weighted_random_sampler_equals_torchs_and_loads_its_indices() {
    let _turn = common::module_turn(module_path!());
    // Skewed weights with zeros, unnormalised ones, many categories, and a sum of exactly 1.
    let many: Vec<f64> = (0..300).map(|i| ((i * 37) % 11) as f64 * 0.25).collect();
    let cases = [
        (vec![0.1, 0.9, 0.0, 2.5], 20, 0u64),
        (vec![1.0; 7], 9, 11),
        (many.clone(), 500, 123_456_789),
        (vec![0.25, 0.25, 0.5], 2, 7),
    ];
    let query = json!({
        "splits": [], "samplers": [],
        "weighted": cases.iter().map(|(w, n, s)| json!({"weights": w, "num_samples": n, "seed": s, "epochs": 3})).collect::<Vec<_>>(),
    });
    let torch = oracle(&["indices"], Some(&query));
    for ((weights, n, seed), epochs) in cases.iter().zip(torch["weighted"].as_array().unwrap()) {
        let mut s = WeightedRandomSampler::new(weights.clone(), *n, *seed).unwrap();
        // Epochs visited out of order replay the one generator as torch's iterations.
        for epoch in [2u64, 0, 1] {
            s.set_epoch(epoch);
            assert_eq!(s.indices(), as_indices(&epochs[epoch as usize]), "{seed}: epoch {epoch}");
        }
    }
    // In a loader: its indices, batched in order, epoch by epoch.
    let sampler = WeightedRandomSampler::new(many, 10, 5).unwrap();
    let mut loader =
        DataLoader::from_arc(numbered(300, 3), 4).sampler(sampler.clone()).num_workers(0);
    loader.set_epoch(1);
    let got: Vec<usize> = loader.iter().flat_map(|b| b.unwrap().indices).collect();
    let mut want = sampler;
    want.set_epoch(1);
    assert_eq!(got, want.indices());
    // Bad weights and counts are errors naming them.
    let err = |w: Vec<f64>, n| WeightedRandomSampler::new(w, n, 0).unwrap_err().to_string();
    assert!(err(vec![1.0, -0.5], 4).contains("weight 1 is -0.5"));
    assert!(err(vec![0.0, 0.0], 4).contains("sum to 0"));
    assert!(err(vec![1.0, f64::NAN], 4).contains("weight 1 is NaN"));
    assert!(err(vec![1.0], 1).contains("num_samples 1"));
}
