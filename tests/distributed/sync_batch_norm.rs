//! SyncBatchNorm (`ResNet::convert_sync_batchnorm`, `BatchNorm2d` with a `SyncSlot`) over two
//! Gloo thread ranks on the CPU:
//! - one layer under DDP, each rank with half of a batch of 8: the output, the input's
//!   gradient, the weight and bias gradients (DDP's average, times 2) and the running statistics
//!   equal BatchNorm's over the whole batch, computed in float64 as the reference, within a
//!   bound derived from float32 rounding (below); the same layer without the group (each rank's
//!   own statistics) is far outside that bound, so the check can fail;
//! - `fit` with DDP on a converted ResNet18: the ranks, fed different images, end with the
//!   same running statistics bit for bit (both read the same all-reduced sums), which plain
//!   BatchNorm does not give.
//!
//! The bound: trainbook accumulates the per-channel sums in float64 and rounds the mean and
//! 1/std to float32 once; each output element then takes at most 16 float32 roundings
//! (relative 2^-24 each) of terms no larger than the scale S given with each comparison, so
//! |error| <= 16 * 2^-24 * S, with f32::EPSILON = 2^-23 covering it twice over.
use crate::common;

use tch::nn::{ModuleT, VarStore};
use tch::{Device, Kind, Tensor};
use trainbook::data::TensorDataset;
use trainbook::dist::SyncGroup;
use trainbook::models::{BatchNorm2d, SyncSlot};
use trainbook::prelude::*;

/// spawn's thread ranks take turns on the process's CPU generator: one test at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

const N: i64 = 8; // the whole batch: 4 samples per rank
const C: i64 = 3;

fn values(t: &Tensor) -> Vec<f64> {
    Vec::try_from(t.detach().to_kind(Kind::Double).flatten(0, -1)).unwrap()
}

fn tensor(v: &[f64], shape: &[i64]) -> Tensor {
    Tensor::from_slice(v).reshape(shape)
}

/// What one rank's layer gives: output, input gradient, weight and bias gradients, running
/// mean and variance.
type LayerResult = [Vec<f64>; 6];

/// One rank's pass: its half of `x`, the upstream gradient `r` (loss = sum(y * r)).
fn layer_rank(
    dist: &Dist,
    x: &[f64],
    r: &[f64],
    affine: &[f64],
    sync: bool,
) -> Result<LayerResult> {
    let k = dist.rank() as i64;
    let half = |v: &[f64]| tensor(v, &[N, C, 5, 5]).narrow(0, 4 * k, 4).to_kind(Kind::Float);
    let vs = VarStore::new(Device::Cpu);
    let slot = SyncSlot::default();
    let bn = BatchNorm2d::new(vs.root() / "bn", C, &slot);
    if sync {
        slot.set(SyncGroup::of(dist)?);
    }
    let mut vars = vs.variables();
    tch::no_grad(|| {
        vars.get_mut("bn.weight").unwrap().copy_(&tensor(&affine[..3], &[C]));
        vars.get_mut("bn.bias").unwrap().copy_(&tensor(&affine[3..], &[C]));
    });
    // Under DDP, as in training: its reducer averages the weight and bias gradients while
    // SyncBatchNorm's backward all-reduces its sums, on the same group.
    let ddp = Ddp::wrap(&vs, dist)?;
    ddp.before_forward()?;
    let x = half(x).set_requires_grad(true);
    let y = bn.forward_t(&x, true);
    ddp.backward(&(&y * half(r)).sum(Kind::Float))?;
    Ok([
        values(&y),
        values(&x.grad()),
        values(&vars["bn.weight"].grad()),
        values(&vars["bn.bias"].grad()),
        values(&vars["bn.running_mean"]),
        values(&vars["bn.running_var"]),
    ])
}

fn max_abs(v: &[f64]) -> f64 {
    v.iter().fold(0.0, |m, x| m.max(x.abs()))
}

fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).fold(0.0, |m, (x, y)| m.max((x - y).abs()))
}

#[test]
fn one_layer_over_two_ranks_is_batchnorm_over_the_whole_batch() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    tch::manual_seed(3);
    let opts = (Kind::Double, Device::Cpu);
    // Channels with different means and spreads, so the per-rank statistics differ.
    let shift = tensor(&[0.5, -2.0, 3.0], &[1, C, 1, 1]);
    let spread = tensor(&[1.0, 0.3, 2.5], &[1, C, 1, 1]);
    let x = Tensor::randn([N, C, 5, 5], opts) * spread + shift;
    let r = Tensor::randn([N, C, 5, 5], opts);
    let affine = Tensor::rand([2 * C], opts) + 0.5;
    let (xv, rv, av) = (values(&x), values(&r), values(&affine));
    let ranks = |sync| spawn(2, |dist| layer_rank(dist, &xv, &rv, &av, sync)).unwrap();

    // The reference: BatchNorm over all 8 samples, in float64.
    let xr = x.set_requires_grad(true);
    let (w, b) = (
        affine.narrow(0, 0, C).set_requires_grad(true),
        affine.narrow(0, C, C).set_requires_grad(true),
    );
    let (rm, rvar) = (Tensor::zeros([C], opts), Tensor::ones([C], opts));
    let y =
        Tensor::batch_norm(&xr, Some(&w), Some(&b), Some(&rm), Some(&rvar), true, 0.1, 1e-5, false);
    (&y * &r).sum(Kind::Double).backward();
    let mean = x.mean_dim(&[0i64, 2, 3][..], true, Kind::Double);
    let var = (&x - &mean).square().mean_dim(&[0i64, 2, 3][..], true, Kind::Double);
    let invstd = (var + 1e-5).rsqrt();
    let xhat = values(&((&x - &mean) * &invstd));
    let scale_w = max_abs(&values(&(&invstd * w.reshape([1, C, 1, 1]))));
    let (w_max, b_max, r_max, xhat_max) =
        (max_abs(&values(&w)), max_abs(&values(&b)), max_abs(&rv), max_abs(&xhat));
    let per_channel = (N * 25) as f64;
    let eps = f32::EPSILON as f64;
    let bounds = [
        ("output", eps * 16.0 * (xhat_max * w_max + b_max)),
        ("input gradient", eps * 16.0 * r_max * scale_w * (2.0 + xhat_max * xhat_max)),
        ("weight gradient", eps * 16.0 * per_channel * r_max * xhat_max),
        ("bias gradient", eps * 16.0 * per_channel * r_max),
        ("running mean", eps * 16.0 * max_abs(&values(&rm))),
        ("running variance", eps * 16.0 * max_abs(&values(&rvar))),
    ];
    let reference = |k: usize, i: usize| -> Vec<f64> {
        match i {
            0 => values(&y.narrow(0, 4 * k as i64, 4)),
            1 => values(&xr.grad().narrow(0, 4 * k as i64, 4)),
            2 => values(&w.grad()),
            3 => values(&b.grad()),
            4 => values(&rm),
            _ => values(&rvar),
        }
    };
    // The weight and bias gradients of the whole batch are the sum of the ranks' shares:
    // twice DDP's average (a power of two, exact).
    let got = |res: &[LayerResult], k: usize, i: usize| -> Vec<f64> {
        match i {
            2 | 3 => res[k][i].iter().map(|g| 2.0 * g).collect(),
            _ => res[k][i].clone(),
        }
    };
    let synced = ranks(true);
    for k in 0..2 {
        for (i, (what, bound)) in bounds.iter().enumerate() {
            let d = max_diff(&got(&synced, k, i), &reference(k, i));
            println!("rank {k}, {what}: {d:e} (bound {bound:e})");
            assert!(d <= *bound, "rank {k}, {what}: {d:e} over the bound {bound:e}");
        }
    }
    // Each rank's own statistics: the output and the running mean are far off.
    let local = ranks(false);
    for i in [0, 1, 4] {
        let d = max_diff(&got(&local, 0, i), &reference(0, i));
        assert!(d > 1000.0 * bounds[i].1, "{}: plain BatchNorm is only {d:e} off", bounds[i].0);
    }
}

/// One rank of `fit`: ResNet18 (converted when `sync`) on 16 random 3x32x32 images per rank
/// (the ranks' images differ), 2 epochs of batches of 4, SGD; returns the running statistics.
fn fit_rank(dist: &Dist, out: &std::path::Path, sync: bool) -> Result<Vec<Vec<f64>>> {
    let k = dist.rank() as i64;
    tch::manual_seed(20 + k); // each rank its own images
    let x = Tensor::randn([16, 3, 32, 32], (Kind::Float, Device::Cpu));
    let y = Tensor::randint(3, [16], (Kind::Int64, Device::Cpu));
    let classes: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
    tch::manual_seed(1); // the same initial weights on both ranks
    let mut vs = VarStore::new(Device::Cpu);
    let model = resnet18(&vs.root(), 3, HeadKind::Linear);
    assert_eq!(model.convert_sync_batchnorm(dist)?, dist.world_size() > 1);
    if !sync {
        model.convert_sync_batchnorm(&Dist::single(Device::Cpu))?;
    }
    assert_eq!(model.syncs_batchnorm(), sync);
    let mut opt = Optimizer::sgd(&vs, 0.05, 0.9);
    let data = || TensorDataset::new(&x, &y, classes.clone());
    let mut train = DataLoader::new(data()?, 4).num_workers(0);
    let mut val = DataLoader::new(data()?, 4).num_workers(0);
    Trainer::new(dist)
        .epochs(2)
        .out(out.join(format!("rank{k}")))
        .resume(false)
        .progress(false)
        .step_log(false)
        .checkpoint_every_epochs(0)
        .keep_best(None)
        .use_distributed_sampler(false) // each rank's images are its own share
        .fit(&mut vs, &model, &mut opt, &mut train, &mut val)?;
    let vars = vs.variables();
    let mut names: Vec<&String> = vars.keys().filter(|n| n.contains("running_")).collect();
    names.sort();
    Ok(names.into_iter().map(|n| values(&vars[n])).collect())
}

#[test]
fn converted_resnet_ranks_share_their_running_statistics_in_fit() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let synced = spawn(2, |dist| fit_rank(dist, dir.path(), true)).unwrap();
    assert_eq!(synced[0].len(), 2 * 20, "ResNet18's 20 BatchNorm layers");
    assert_eq!(synced[0], synced[1], "the running statistics of the whole batch, on both ranks");
    let plain = spawn(2, |dist| fit_rank(dist, dir.path(), false)).unwrap();
    assert_ne!(plain[0], plain[1], "plain BatchNorm: each rank its own statistics");
    let single = Dist::single(Device::Cpu);
    let vs = VarStore::new(Device::Cpu);
    let model = resnet18(&vs.root(), 3, HeadKind::Linear);
    assert!(!model.convert_sync_batchnorm(&single).unwrap(), "a world of one has nothing to share");
}
