//! Splitting and relabelling data sets against torch/torchvision: `random_split` and
//! `SubsetRandomSampler` give torch's exact indices, a `Subset` shards disjointly over ranks,
//! `Relabel` maps labels by class name, and a loader with `RASampler` visits its indices per
//! epoch. (`TinyImageNet` is in `tiny_imagenet.rs`, with this module's oracle.)
use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;

use serde_json::{json, Value};
use tch::{Device, Kind, Tensor};
use trainbook::data::{
    random_split, read_class_to_idx, DataLoader, Dataset, DistributedSampler, RASampler, Relabel,
    SplitLengths, Subset, SubsetRandomSampler, TensorDataset,
};
use trainbook::launch::spawn;
use trainbook::transforms::aug_rng;

pub(crate) fn oracle(args: &[&str], stdin: Option<&Value>) -> Value {
    let mut child = Command::new(common::venv_bin("python"))
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oracle/split.py"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let input = stdin.map(Value::to_string).unwrap_or_default();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "oracle {args:?} failed");
    serde_json::from_slice(&out.stdout).unwrap()
}

pub(crate) fn as_indices(v: &Value) -> Vec<usize> {
    v.as_array().unwrap().iter().map(|i| i.as_u64().unwrap() as usize).collect()
}

/// `n` samples of 1x2x2 whose pixels hold their index, labelled `index % classes`.
pub(crate) fn numbered(n: usize, classes: usize) -> Arc<TensorDataset> {
    let images = Tensor::arange(n as i64, (Kind::Float, Device::Cpu))
        .view([-1, 1, 1, 1])
        .expand([n as i64, 1, 2, 2], false);
    let labels = Tensor::arange(n as i64, (Kind::Int64, Device::Cpu)).remainder(classes as i64);
    let names = (0..classes).map(|c| format!("c{c}")).collect();
    Arc::new(TensorDataset::new(&images, &labels, names).unwrap())
}

#[test]
fn random_split_and_subset_random_sampler_equal_torch() {
    let _turn = common::module_turn(module_path!());
    let seeds = [0u64, 1, 42, (1 << 40) + 3];
    let mut splits: Vec<(Value, SplitLengths)> = Vec::new();
    #[rustfmt::skip]
    let counts: [(usize, &[usize]); 12] = [
        (0, &[0]), (0, &[0, 0]), (1, &[1]), (1, &[0, 1]), (1, &[1, 0]), (2, &[1, 1]),
        (7, &[2, 2, 3]), (7, &[0, 7]), (10, &[3, 7]), (100, &[80, 20]),
        (1000, &[800, 100, 100]), (1001, &[1, 1000]),
    ];
    #[rustfmt::skip]
    let fractions: [(usize, &[f64]); 12] = [
        (0, &[0.5, 0.5]), (1, &[0.5, 0.5]), (1, &[1.0]), (5, &[0.0, 1.0]), (7, &[0.5, 0.5]),
        (10, &[0.8, 0.2]), (10, &[1.0 / 3.0; 3]), (13, &[0.1; 10]), (100, &[0.8, 0.2]),
        (1000, &[0.3, 0.3, 0.4]), (1001, &[0.3, 0.3, 0.4]), (1001, &[0.1; 10]),
    ];
    for seed in seeds {
        for (n, lengths) in counts {
            splits.push((json!({"n": n, "lengths": lengths, "seed": seed}), lengths.into()));
        }
        for (n, lengths) in fractions {
            splits.push((json!({"n": n, "lengths": lengths, "seed": seed}), lengths.into()));
        }
    }
    let lists: Vec<Vec<usize>> = vec![
        vec![],
        vec![5],
        vec![3, 9],
        (0..10).rev().collect(),
        (0..100).map(|i| (i * 37) % 23).collect(), // repeats
        (0..1000).map(|i| (i * 7) % 1013).collect(),
    ];
    let mut samplers = Vec::new();
    for seed in [0u64, 7, (1 << 33) + 5] {
        for list in &lists {
            samplers.push(json!({"indices": list, "seed": seed, "epochs": 3}));
        }
    }
    let query = json!({
        "splits": splits.iter().map(|(q, _)| q.clone()).collect::<Vec<_>>(),
        "samplers": samplers,
    });
    let torch = oracle(&["indices"], Some(&query));

    for ((q, lengths), want) in splits.iter().zip(torch["splits"].as_array().unwrap()) {
        let data = numbered(q["n"].as_u64().unwrap() as usize, 1);
        let parts = random_split(data, lengths.clone(), q["seed"].as_u64().unwrap()).unwrap();
        let got: Vec<Vec<usize>> = parts.iter().map(|p| p.indices().to_vec()).collect();
        let want: Vec<Vec<usize>> = want.as_array().unwrap().iter().map(as_indices).collect();
        assert_eq!(got, want, "random_split differs for {q}");
    }
    for (q, want) in samplers.iter().zip(torch["samplers"].as_array().unwrap()) {
        let want: Vec<Vec<usize>> = want.as_array().unwrap().iter().map(as_indices).collect();
        let (list, seed) = (as_indices(&q["indices"]), q["seed"].as_u64().unwrap());
        let mut sampler = SubsetRandomSampler::new(list.clone(), seed);
        for (epoch, want) in want.iter().enumerate() {
            sampler.set_epoch(epoch as u64);
            assert_eq!(&sampler.indices(), want, "SubsetRandomSampler epoch {epoch} for {q}");
        }
        let mut jump = SubsetRandomSampler::new(list, seed);
        jump.set_epoch(2);
        assert_eq!(jump.indices(), want[2], "epoch 2 set directly, {q}");
        jump.set_epoch(0);
        assert_eq!(jump.indices(), want[0], "back to epoch 0, {q}");
    }

    // The loader visits the sampler's order, epoch by epoch, whatever its thread count.
    let (q, want) = (&samplers[11], &torch["samplers"][11]);
    let sampler = SubsetRandomSampler::new(as_indices(&q["indices"]), q["seed"].as_u64().unwrap());
    for workers in [0, 3] {
        let mut loader = DataLoader::from_arc(numbered(1013, 4), 64)
            .sampler(sampler.clone())
            .shuffle(true) // ignored: the sampler decides
            .num_workers(workers);
        assert_eq!(loader.num_samples(), 1000);
        for epoch in 0..3 {
            loader.set_epoch(epoch);
            let mut seen = Vec::new();
            for batch in loader.iter() {
                let batch = batch.unwrap();
                let pixels: Vec<f32> =
                    Vec::try_from(&batch.images.select(3, 0).select(2, 0).reshape([-1])).unwrap();
                let ids: Vec<usize> = pixels.iter().map(|&p| p as usize).collect();
                assert_eq!(ids, batch.indices);
                seen.extend(batch.indices);
            }
            assert_eq!(seen, as_indices(&want[epoch as usize]), "loader epoch {epoch}");
        }
    }
}

#[test]
fn subsets_check_indices_and_keep_labels() {
    let _turn = common::module_turn(module_path!());
    let data = numbered(10, 3);
    let err = Subset::new(data.clone(), [1, 10, 2]).unwrap_err().to_string();
    assert!(err.contains("index 10") && err.contains("10 samples"), "{err}");
    let sub = Subset::new(data.clone(), [9, 4, 4]).unwrap();
    assert_eq!((sub.len(), sub.label(0), sub.label(1)), (3, 0, 1));
    assert_eq!(sub.classes(), ["c0", "c1", "c2"]);
    let (img, label) = sub.get(0, &mut aug_rng(0, 0, 0)).unwrap();
    assert_eq!((img.data[0], label), (9.0, 0));
    assert!(sub.get(3, &mut aug_rng(0, 0, 3)).unwrap_err().to_string().contains("out of range"));
    // Subsets of subsets index through both.
    let inner = Subset::new(Arc::new(sub), [2]).unwrap();
    assert_eq!(inner.get(0, &mut aug_rng(0, 0, 0)).unwrap().0.data[0], 4.0);
    let err = random_split(data.clone(), [3, 3], 0).unwrap_err().to_string();
    assert!(err.contains("add up to 6") && err.contains("10 samples"), "{err}");
    assert!(random_split(data.clone(), [0.5, 0.6], 0).is_err());
    assert!(random_split(data, [1.2, -0.2], 0).unwrap_err().to_string().contains("index 0"));
}

/// Every rank's real (non-padding) samples, as indices of the full data set.
fn shards_are_disjoint(subset: &Subset<TensorDataset>, ranks: &[Vec<(usize, bool)>]) {
    let len = ranks[0].len();
    assert!(ranks.iter().all(|r| r.len() == len), "ranks get different counts");
    let mut seen = BTreeSet::new();
    for rank in ranks {
        for &(index, padding) in rank {
            if !padding {
                assert!(seen.insert(index), "index {index} on two ranks");
            }
        }
    }
    let all: BTreeSet<usize> = subset.indices().iter().copied().collect();
    assert_eq!(seen, all, "the ranks together do not cover the subset");
}

#[test]
fn subset_shards_are_disjoint_across_ranks() {
    let _turn = common::module_turn(module_path!());
    let data = numbered(60, 5);
    let parts = random_split(data, [43, 17], 3).unwrap();
    let subset = parts[0].clone();
    for world in [2usize, 3] {
        // The sampler given by hand: rank r of `world`, as torch's DistributedSampler(subset).
        let by_hand: Vec<Vec<(usize, bool)>> = (0..world)
            .map(|rank| {
                let sampler = DistributedSampler::new(subset.len(), world, rank).unwrap().seed(11);
                let mut loader = DataLoader::new(subset.clone(), 4).sampler(sampler).num_workers(0);
                let mut out = Vec::new();
                for batch in loader.iter() {
                    let batch = batch.unwrap();
                    let labels: Vec<i64> = Vec::try_from(&batch.labels).unwrap();
                    for (k, &i) in batch.indices.iter().enumerate() {
                        let full = subset.indices()[i];
                        assert_eq!(labels[k], (full % 5) as i64);
                        out.push((full, batch.is_padding[k]));
                    }
                }
                out
            })
            .collect();
        shards_are_disjoint(&subset, &by_hand);

        // `DataLoader::distributed` on the ranks of a real (threaded, Gloo) job.
        let job: Vec<Vec<(usize, bool)>> = spawn(world, |dist| {
            let mut loader = DataLoader::new(subset.clone(), 4)
                .shuffle(true)
                .seed(11)
                .distributed(dist)
                .num_workers(0);
            let mut out = Vec::new();
            for batch in loader.iter() {
                let batch = batch?;
                for (k, &i) in batch.indices.iter().enumerate() {
                    out.push((subset.indices()[i], batch.is_padding[k]));
                }
            }
            Ok(out)
        })
        .unwrap();
        shards_are_disjoint(&subset, &job);
        assert_eq!(job, by_hand, "distributed(&dist) differs from the samplers given by hand");
    }
}

#[test]
fn relabel_maps_labels_by_class_name() {
    let _turn = common::module_turn(module_path!());
    let dir = common::WorkDir::new("relabel");
    let images = Tensor::zeros([4, 1, 2, 2], (Kind::Float, Device::Cpu));
    let labels = Tensor::from_slice(&[0i64, 1, 2, 1]);
    let classes = || vec!["cat".to_string(), "dog".into(), "eel".into()];
    let data = || TensorDataset::new(&images, &labels, classes()).unwrap();

    let json_map = dir.join("map.json");
    std::fs::write(&json_map, r#"{"dog": 5, "cat": 2, "eel": 0, "fox": 7}"#).unwrap();
    let text_map = dir.join("map.tsv");
    std::fs::write(&text_map, "# wnid\tindex\ncat\t2\ndog\t5\n\neel\t0\nfox 7\n").unwrap();
    let keras_map = dir.join("imagenet_class_index.json");
    std::fs::write(
        &keras_map,
        r#"{"0": ["eel", "Eel"], "2": ["cat", "Cat"], "5": ["dog", "Dog"], "7": ["fox", "Fox"]}"#,
    )
    .unwrap();
    for path in [&json_map, &text_map, &keras_map] {
        let relabelled = Relabel::from_file(data(), path).unwrap();
        let got: Vec<i64> = (0..4).map(|i| relabelled.label(i)).collect();
        assert_eq!(got, [2, 5, 0, 5], "{}", path.display());
        let names = relabelled.classes();
        assert_eq!(names.len(), 8);
        assert_eq!((names[5].as_str(), names[7].as_str(), names[1].as_str()), ("dog", "fox", "1"));
        assert_eq!(relabelled.get(2, &mut aug_rng(0, 0, 2)).unwrap().1, 0);
        let mut loader = DataLoader::new(relabelled, 4).num_workers(0);
        let batch = loader.iter().next().unwrap().unwrap();
        assert_eq!(Vec::<i64>::try_from(&batch.labels).unwrap(), [2, 5, 0, 5]);
    }

    let partial: BTreeMap<String, i64> = [("cat".to_string(), 0), ("dog".to_string(), 1)].into();
    let err = Relabel::new(data(), &partial).unwrap_err().to_string();
    assert!(err.contains("\"eel\"") && err.contains("not in the class_to_idx map"), "{err}");
    let bad = dir.join("bad.tsv");
    std::fs::write(&bad, "cat\t0\ndog\n").unwrap();
    let err = read_class_to_idx(&bad).unwrap_err().to_string();
    assert!(err.contains("bad.tsv") && err.contains("line 2"), "{err}");
    std::fs::write(&bad, "cat\t0\ncat\t1\n").unwrap();
    assert!(read_class_to_idx(&bad).unwrap_err().to_string().contains("\"cat\" given twice"));
    let err = read_class_to_idx(dir.join("nope.json")).unwrap_err().to_string();
    assert!(err.contains("nope.json"), "{err}");
}

#[test]
fn a_loader_with_the_repeated_augmentation_sampler_visits_its_indices_per_epoch() {
    let _turn = common::module_turn(module_path!());
    let n = 600i64;
    let x = Tensor::zeros([n, 1, 2, 2], (Kind::Float, Device::Cpu));
    let y = Tensor::arange(n, (Kind::Int64, Device::Cpu)).remainder(7);
    let ds = TensorDataset::new(&x, &y, (0..7).map(|c| c.to_string()).collect()).unwrap();
    let sampler = RASampler::new(ds.len(), 2, 1, 3).unwrap();
    let mut loader = DataLoader::new(ds, 16).sampler(sampler.clone()).seed(5).num_workers(2);
    for epoch in 0..2 {
        loader.set_epoch(epoch);
        let mut want = sampler.clone().seed(5);
        want.set_epoch(epoch);
        let mut seen = Vec::new();
        for batch in loader.iter() {
            let batch = batch.unwrap();
            assert!(batch.is_padding.iter().all(|p| !p), "repeats are not padding");
            seen.extend(batch.indices.iter().copied());
        }
        assert_eq!(seen, want.indices(), "epoch {epoch}");
        assert_eq!(seen.len(), 256); // 600 // 256 * 256 / 2 ranks
    }
}
