//! `trainbook::data::DistributedSampler` yields exactly torch's indices over many random
//! configurations (torch in the project's venv is the oracle), and `RASampler` the repeated-
//! augmentation sampler's (timm's `RepeatAugSampler`, the same algorithm, as the oracle).
use crate::common;

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{json, Value};
use trainbook::data::{DistributedSampler, RASampler};

/// A small deterministic generator for test configurations (no extra dependency).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, bound: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % bound
    }
}

#[test]
fn indices_equal_torch_distributed_sampler() {
    let _turn = common::module_turn(module_path!());
    let mut rng = Lcg(2024);
    let mut configs = Vec::new();
    for case in 0..400 {
        let len = match case % 4 {
            0 => rng.next(8),
            1 => rng.next(100) + 1,
            2 => rng.next(5000) + 1,
            _ => 60_000 + rng.next(20),
        };
        let replicas = rng.next(8) + 1;
        let seed = match case % 3 {
            0 => 0,
            1 => rng.next(1000),
            _ => (1u64 << 40) + rng.next(1 << 20),
        };
        configs.push(json!({
            "len": len, "replicas": replicas, "rank": rng.next(replicas), "shuffle": case % 5 != 0,
            "seed": seed, "drop_last": case % 2 == 1, "epoch": rng.next(6),
        }));
    }
    let mut child = Command::new(common::venv_bin("python"))
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oracle/distributed_sampler.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(Value::Array(configs.clone()).to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let expected: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();

    for (c, want) in configs.iter().zip(&expected) {
        let mut s = DistributedSampler::new(
            c["len"].as_u64().unwrap() as usize,
            c["replicas"].as_u64().unwrap() as usize,
            c["rank"].as_u64().unwrap() as usize,
        )
        .unwrap()
        .shuffle(c["shuffle"].as_bool().unwrap())
        .seed(c["seed"].as_u64().unwrap())
        .drop_last(c["drop_last"].as_bool().unwrap());
        s.set_epoch(c["epoch"].as_u64().unwrap());
        let got: Vec<u64> = s.indices().into_iter().map(|i| i as u64).collect();
        let want_idx: Vec<u64> =
            want["indices"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        assert_eq!(got, want_idx, "indices differ for {c}");
        assert_eq!(s.len() as u64, want["len"].as_u64().unwrap(), "len differs for {c}");
    }
}

#[test]
fn repeated_augmentation_indices_equal_the_recipes_sampler() {
    let _turn = common::module_turn(module_path!());
    let mut rng = Lcg(77);
    let mut configs = Vec::new();
    for case in 0..120 {
        let len = match case % 3 {
            0 => 256 + rng.next(300),
            1 => 1000 + rng.next(5000),
            _ => 50_000 + rng.next(20),
        };
        let replicas = rng.next(8) + 1;
        let (seed, epoch) = (if case % 2 == 0 { 0 } else { rng.next(1000) }, rng.next(6));
        configs.push(json!({
            "len": len, "replicas": replicas, "rank": rng.next(replicas), "shuffle": case % 5 != 0,
            "reps": rng.next(4) + 1, "seed": seed, "epoch": epoch, "generator_seed": seed + epoch,
        }));
    }
    let mut child = Command::new(common::venv_bin("python"))
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oracle/ra_sampler.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let input = Value::Array(configs.clone()).to_string();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let expected: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let u = |c: &Value, k: &str| c[k].as_u64().unwrap() as usize;
    for (c, want) in configs.iter().zip(&expected) {
        let mut s = RASampler::new(u(c, "len"), u(c, "replicas"), u(c, "rank"), u(c, "reps"))
            .unwrap()
            .shuffle(c["shuffle"].as_bool().unwrap())
            .seed(c["seed"].as_u64().unwrap());
        s.set_epoch(c["epoch"].as_u64().unwrap());
        let want_indices: Vec<usize> = want["indices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as usize)
            .collect();
        assert_eq!(s.len(), want["len"].as_u64().unwrap() as usize, "{c}");
        assert_eq!(s.indices(), want_indices, "{c}");
    }
    // Under 256 samples torchvision's reference selects none (len // 256 * 256 / ranks), where
    // timm's variant keeps some: trainbook follows torchvision's.
    assert_eq!(RASampler::new(255, 1, 0, 3).unwrap().len(), 0);
    assert!(RASampler::new(10, 2, 2, 3).unwrap_err().to_string().contains("rank 2"));
    assert!(RASampler::new(10, 2, 0, 0).unwrap_err().to_string().contains("repetitions"));
    assert!(RASampler::new(1, 8, 0, 1).unwrap_err().to_string().contains("cannot be padded"));
}
