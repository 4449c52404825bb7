//! `fit` under several ranks with loaders that are not sharded (neither `distributed` nor given
//! a sampler), on 2 Gloo thread ranks: the run shards them as `distributed(&dist)` would
//! (Lightning's `use_distributed_sampler`), so it ends on the weights of the same run sharded
//! by hand, bit for bit, and gives the loaders back in their own order; with
//! `use_distributed_sampler(false)` every rank trains on the whole set, and the weights differ.
use crate::common;
use crate::own_sampler::{data, sorted_weights};

use tch::nn::VarStore;
use tch::{Device, Tensor};
use trainbook::data::DataLoader;
use trainbook::dist::Dist;
use trainbook::fit::Trainer;
use trainbook::launch::spawn;
use trainbook::train::Optimizer;

#[derive(Clone, Copy, PartialEq)]
enum Loaders {
    /// `.distributed(&dist)` on both, by hand.
    ShardedByHand,
    /// Neither sharded; `fit` shards them.
    LeftToFit,
    /// Neither sharded, and `use_distributed_sampler(false)`.
    KeptWhole,
}

/// Two epochs of a linear classifier on 2 ranks; rank 0's final weights, and whether both
/// loaders came back in their own order, shuffled as before, with all their batches.
fn fit(out: &std::path::Path, loaders: Loaders) -> (Vec<(String, Tensor)>, Vec<bool>) {
    let (train, val) = (data(1, 16), data(2, 8));
    let runs = spawn(2, |dist: &Dist| {
        tch::manual_seed(3);
        let mut vs = VarStore::new(Device::Cpu);
        let net = common::linear_classifier(&vs);
        let mut opt = Optimizer::sgd(&vs, 0.1, 0.9);
        let mut train = DataLoader::from_arc(train.clone(), 2).shuffle(true).seed(5).num_workers(0);
        let mut val = DataLoader::from_arc(val.clone(), 4).num_workers(0);
        if loaders == Loaders::ShardedByHand {
            train = train.distributed(dist);
            val = val.distributed(dist);
        }
        Trainer::new(dist)
            .epochs(2)
            .out(out)
            .progress(false)
            .use_distributed_sampler(loaders != Loaders::KeptWhole)
            .fit(&mut vs, &net, &mut opt, &mut train, &mut val)?;
        let back = vec![
            train.uses_own_order() == (loaders != Loaders::ShardedByHand),
            train.is_shuffled(),
            train.len() == if loaders == Loaders::ShardedByHand { 4 } else { 8 },
            val.len() == if loaders == Loaders::ShardedByHand { 1 } else { 2 },
        ];
        Ok((sorted_weights(&vs), back))
    })
    .unwrap();
    assert_eq!(runs[0].0, runs[1].0, "the two ranks hold the same weights");
    let weights = runs[0].0.iter().map(|(n, v)| (n.clone(), Tensor::from_slice(v))).collect();
    (weights, runs[0].1.clone())
}

#[test]
fn fit_shards_a_loader_left_unsharded_and_gives_it_back() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("unsharded-loader");
    let (by_hand, back) = fit(&work.join("by-hand"), Loaders::ShardedByHand);
    assert_eq!(back, [true; 4], "the hand-sharded loaders as they were");
    let (by_fit, back) = fit(&work.join("by-fit"), Loaders::LeftToFit);
    assert_eq!(back, [true; 4], "own order, shuffled, whole again after the run");
    for ((n, a), (m, b)) in by_fit.iter().zip(&by_hand) {
        assert_eq!(n, m);
        assert!(a.equal(b), "{n}: fit's sharding differs from .distributed(&dist)");
    }
    let (whole, back) = fit(&work.join("whole"), Loaders::KeptWhole);
    assert_eq!(back, [true; 4]);
    assert!(
        whole.iter().zip(&by_hand).any(|((_, a), (_, b))| !a.equal(b)),
        "use_distributed_sampler(false): every rank trains on the whole set"
    );
}
