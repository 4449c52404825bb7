//! A sampler of one's own (`trainbook::data::Sampler`) under DDP, on 2 Gloo thread ranks: one
//! that gives rank r the indices r, r + 2, r + 4, ... trains, through `fit` with `Ddp`, to the
//! weights of the same run sharded by a `DistributedSampler` without shuffling (which gives
//! those indices), bit for bit; and the loader asks a sampler for each epoch's order after
//! `set_epoch`, as torch's loop does.
use crate::common;

use std::sync::Arc;

use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};
use trainbook::data::{DataLoader, DistributedSampler, Sampler, TensorDataset};
use trainbook::dist::Dist;
use trainbook::fit::Trainer;
use trainbook::launch::spawn;
use trainbook::train::Optimizer;

/// Rank `rank` of `world` takes every `world`-th index from `rank`; with `flip`, odd epochs
/// visit its share backwards.
#[derive(Debug)]
struct Stride {
    len: usize,
    rank: usize,
    world: usize,
    flip: bool,
    epoch: u64,
}

impl Sampler for Stride {
    fn epoch_indices(&self) -> Vec<(usize, bool)> {
        let mut share: Vec<usize> = (self.rank..self.len).step_by(self.world).collect();
        if self.flip && self.epoch % 2 == 1 {
            share.reverse();
        }
        share.into_iter().map(|i| (i, false)).collect()
    }
    fn set_epoch(&mut self, epoch: u64) {
        self.epoch = epoch;
    }
}

/// Every variable of `vs` as plain floats, by name (sendable out of a thread rank).
pub(crate) fn sorted_weights(vs: &VarStore) -> Vec<(String, Vec<f32>)> {
    let mut w: Vec<(String, Vec<f32>)> = vs
        .variables()
        .into_iter()
        .map(|(n, t)| (n, Vec::<f32>::try_from(t.flatten(0, -1)).unwrap()))
        .collect();
    w.sort_by(|a, b| a.0.cmp(&b.0));
    w
}

/// `n` random 1x4x4 pictures of 3 classes drawn after `seed` (`unsharded_loader` too).
pub(crate) fn data(seed: i64, n: i64) -> Arc<TensorDataset> {
    tch::manual_seed(seed);
    let x = Tensor::randn([n, 1, 4, 4], (Kind::Float, Device::Cpu));
    let y = Tensor::randint(3, [n], (Kind::Int64, Device::Cpu));
    let names = vec!["a".into(), "b".into(), "c".into()];
    Arc::new(TensorDataset::new(&x, &y, names).unwrap())
}

/// Two epochs of a linear classifier on 2 ranks, the training set ordered by `own` (else a
/// DistributedSampler without shuffling); rank 0's final weights.
fn fit(out: &std::path::Path, own: bool) -> Vec<(String, Tensor)> {
    let (train, val) = (data(1, 16), data(2, 8));
    let weights = spawn(2, |dist: &Dist| {
        tch::manual_seed(3);
        let mut vs = VarStore::new(Device::Cpu);
        let net = common::linear_classifier(&vs);
        let mut opt = Optimizer::sgd(&vs, 0.1, 0.9);
        let loader = DataLoader::from_arc(train.clone(), 2).num_workers(0);
        let mut train = if own {
            let (rank, world) = (dist.rank(), dist.world_size());
            loader.sampler(Stride { len: 16, rank, world, flip: false, epoch: 0 })
        } else {
            let sampler = DistributedSampler::for_dist(16, dist).shuffle(false);
            loader.sampler(sampler)
        };
        let mut val = DataLoader::from_arc(val.clone(), 4).distributed(dist).num_workers(0);
        Trainer::new(dist)
            .epochs(2)
            .out(out)
            .progress(false)
            .fit(&mut vs, &net, &mut opt, &mut train, &mut val)?;
        Ok(sorted_weights(&vs))
    })
    .unwrap();
    assert_eq!(weights[0], weights[1], "the two ranks hold the same weights");
    weights[0].iter().map(|(n, v)| (n.clone(), Tensor::from_slice(v))).collect()
}

#[test]
fn an_own_sampler_shards_as_a_distributed_sampler_does_under_ddp() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("own-sampler-ddp");
    let own = fit(&work.join("own"), true);
    let reference = fit(&work.join("distributed"), false);
    for ((n, a), (m, b)) in own.iter().zip(&reference) {
        assert_eq!(n, m);
        assert!(a.equal(b), "{n}: the own sampler's run differs from DistributedSampler's");
    }
}

#[test]
fn the_loader_asks_for_each_epochs_order_after_set_epoch() {
    let _turn = common::module_turn(module_path!());
    let mut loader = DataLoader::from_arc(data(1, 16), 3)
        .sampler(Stride { len: 16, rank: 1, world: 2, flip: true, epoch: 0 })
        .num_workers(0);
    assert_eq!((loader.num_samples(), loader.len(), loader.is_shuffled()), (8, 3, false));
    let seen = |loader: &mut DataLoader<TensorDataset>| -> Vec<usize> {
        loader.iter().flat_map(|b| b.unwrap().indices).collect()
    };
    assert_eq!(seen(&mut loader), [1, 3, 5, 7, 9, 11, 13, 15]);
    loader.set_epoch(1);
    assert_eq!(seen(&mut loader), [15, 13, 11, 9, 7, 5, 3, 1]);
    // Its shuffle and seed settings are the sampler's business: this one has none.
    loader.set_shuffle(true);
    loader.set_epoch(2);
    assert_eq!(seen(&mut loader), [1, 3, 5, 7, 9, 11, 13, 15]);
    assert!(loader.distributed_sampler().is_none());
}
