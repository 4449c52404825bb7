//! DDP on c10d's Reducer computes what one process computes:
//! - by construction: 2 ranks x batch 8 end with exactly the weights of one process that runs the
//!   two ranks' half-batches one after the other and accumulates half of each gradient (with
//!   torch DDP's per-rank BatchNorm: rank 0's running statistics) - same kernels, same batch
//!   shapes, one thread each, and scaling by 1/2 is exact in floating point;
//! - within float32 rounding: 2 ranks x batch 8, and gradient accumulation 2 x 8 on one rank,
//!   against one process with batch 16 (MNIST CNN, no BatchNorm). The tolerance is derived in
//!   the test: the same one-process run in float64 measures float32's rounding error on this
//!   computation, and two float32 evaluations in different summation orders may differ by the
//!   sum of their errors (allowed: 4x the measured one, plus 8 ulps of the largest weight).
//!
//! The ranks are this test binary (`common::ranks`).
use crate::common;

use std::path::{Path, PathBuf};

use crate::common::ranks::run_ranks;
use tch::nn::{ModuleT, VarStore};
use tch::{Device, Kind, Tensor};
use trainbook::data::{DataLoader, DistributedSampler, TensorDataset};
use trainbook::dist::Dist;
use trainbook::models::{resnet34_classifier, state_dict, to_safetensors_bytes, MnistNet};
use trainbook::train::{train_epoch, CrossEntropyLoss, EpochOptions, Optimizer, OptimizerKind};
use trainbook::train::{CommHook, Ddp, DdpOptions};

const STEPS: u64 = 3;

fn kind(name: &str) -> OptimizerKind {
    if name == "sgd" {
        OptimizerKind::Sgd { momentum: 0.9, dampening: 0.0, nesterov: false, weight_decay: 1e-4 }
    } else {
        OptimizerKind::adam()
    }
}

fn lr(optim: &str) -> f64 {
    if optim == "sgd" {
        0.05
    } else {
        1e-3
    }
}

/// 16 fixed samples, identical on every rank.
fn samples(model: &str) -> (Tensor, Tensor) {
    tch::manual_seed(42);
    let shape: [i64; 4] = if model == "mnist" { [16, 1, 28, 28] } else { [16, 3, 48, 40] };
    (
        Tensor::randn(shape, (Kind::Float, Device::Cpu)),
        Tensor::randint(3, [16], (Kind::Int64, Device::Cpu)),
    )
}

fn build(model: &str, vs: &VarStore) -> Box<dyn ModuleT> {
    if model == "mnist" {
        Box::new(MnistNet::new(&vs.root()))
    } else {
        Box::new(resnet34_classifier(&vs.root(), 3))
    }
}

/// `rank` of `world`'s shard of the 16 samples in step `step` (torch's DistributedSampler).
fn shard_loader(
    model: &str,
    world: usize,
    rank: usize,
    step: u64,
    kind: Kind,
) -> DataLoader<TensorDataset> {
    let (x, y) = samples(model);
    let mut sampler = DistributedSampler::new(16, world, rank).unwrap();
    sampler.set_epoch(step);
    let mut loader =
        DataLoader::new(TensorDataset::new(&x.to_kind(kind), &y, vec![]).unwrap(), 16 / world)
            .sampler(sampler)
            .num_workers(0);
    loader.set_epoch(step);
    loader
}

/// Sum of all parameters (buffers legitimately differ between ranks until the next broadcast).
fn checksum(vs: &VarStore) -> f64 {
    trainbook::train::named_parameters(vs)
        .iter()
        .map(|(_, t)| t.to_kind(Kind::Double).sum(Kind::Double).double_value(&[]))
        .sum()
}

fn save(vs: &VarStore, out: &Path, name: &str) {
    std::fs::write(out.join(name), to_safetensors_bytes(&state_dict(vs), None).unwrap()).unwrap();
}

/// A model with rank 0's initial weights (seed 7), as `Ddp::wrap` makes every rank start.
fn initial(model: &str) -> (VarStore, Box<dyn ModuleT>) {
    tch::manual_seed(7);
    let vs = VarStore::new(Device::Cpu);
    let net = build(model, &vs);
    (vs, net)
}

/// The `DdpOptions` a scenario variant names.
fn options(variant: &str) -> DdpOptions {
    let base = DdpOptions::default();
    match variant {
        "default" => base,
        "static" => DdpOptions { static_graph: true, ..base },
        "view" => DdpOptions { gradient_as_bucket_view: true, ..base },
        "small-buckets" => DdpOptions { bucket_cap_mb: Some(0.05), ..base },
        "fp16" => DdpOptions { comm_hook: CommHook::Fp16Compress, ..base },
        "bf16" => DdpOptions { comm_hook: CommHook::Bf16Compress, ..base },
        _ => panic!("unknown variant {variant}"),
    }
}

/// One rank: Ddp with the Reducer, a shard of batch 16/world per step; ranks must agree.
fn ddp_rank(model: &str, optim: &str, variant: &str, out: &Path) {
    let dist = Dist::init().unwrap();
    tch::manual_seed(7 + dist.rank() as i64); // different on purpose: Ddp::wrap must fix it
    let vs = VarStore::new(Device::Cpu);
    let net = build(model, &vs);
    let ddp = Ddp::wrap_with(&vs, &dist, options(variant)).unwrap();
    let mut opt = Optimizer::new(&vs, kind(optim), lr(optim));
    let train = model != "mnist"; // BatchNorm in training mode; the CNN without dropout
    for step in 0..STEPS {
        for batch in shard_loader(model, dist.world_size(), dist.rank(), step, Kind::Float).iter() {
            let batch = batch.unwrap();
            ddp.before_forward().unwrap();
            let loss =
                CrossEntropyLoss::new().mean(&net.forward_t(&batch.images, train), &batch.labels);
            opt.zero_grad();
            ddp.backward(&loss).unwrap();
            opt.step().unwrap();
        }
        let sums = dist.all_gather(&Tensor::from_slice(&[checksum(&vs)])).unwrap();
        let sums: Vec<f64> = sums.iter().map(|t| t.double_value(&[0])).collect();
        assert!(sums.iter().all(|s| *s == sums[0]), "ranks disagree after step {step}: {sums:?}");
        dist.println(format!("step {step}: ranks agree (checksum {:.6})", sums[0]));
    }
    if dist.world_size() > 1 {
        dist.println(format!("buckets after rebuild: {}", ddp.bucket_names().unwrap().len()));
    }
    // Before the next forward pass DDP makes every rank use rank 0's BatchNorm statistics.
    ddp.before_forward().unwrap();
    save(&vs, out, &format!("rank{}.safetensors", dist.rank()));
    dist.destroy().unwrap();
}

/// One process doing what 2 DDP ranks do: each rank's half-batch in turn, half of each
/// gradient accumulated, BatchNorm statistics as rank 0's.
fn virtual_ranks(model: &str, optim: &str, out: &Path) {
    let (vs, net) = initial(model);
    save(&vs, out, "init.safetensors");
    let mut opt = Optimizer::new(&vs, kind(optim), lr(optim));
    let train = model != "mnist";
    let buffers: Vec<Tensor> = vs
        .variables()
        .into_iter()
        .filter(|(n, _)| n.contains("running_"))
        .map(|(_, t)| t)
        .collect();
    let snapshot = |bs: &[Tensor]| bs.iter().map(|t| t.copy()).collect::<Vec<_>>();
    let restore = |bs: &[Tensor], saved: &[Tensor]| {
        tch::no_grad(|| {
            bs.iter().zip(saved).for_each(|(b, s)| {
                b.shallow_clone().copy_(s);
            })
        })
    };
    for step in 0..STEPS {
        let start = snapshot(&buffers);
        let mut after_rank0 = Vec::new();
        opt.zero_grad();
        for rank in 0..2 {
            restore(&buffers, &start);
            for batch in shard_loader(model, 2, rank, step, Kind::Float).iter() {
                let batch = batch.unwrap();
                (CrossEntropyLoss::new().mean(&net.forward_t(&batch.images, train), &batch.labels)
                    / 2.0)
                    .backward();
            }
            if rank == 0 {
                after_rank0 = snapshot(&buffers);
            }
        }
        restore(&buffers, &after_rank0);
        opt.step().unwrap();
    }
    save(&vs, out, "virtual.safetensors");
}

/// One process, batch 16, in float32 or float64 (the rounding-error yardstick); or, with
/// `world` 2, only rank 0's half of each batch: what a rank that never synchronised would do.
fn one_process(optim: &str, kind_: Kind, world: usize, out: &Path) {
    let (mut vs, net) = initial("mnist");
    if kind_ == Kind::Double {
        vs.double();
    }
    save(&vs, out, "init.safetensors");
    let mut opt = Optimizer::new(&vs, kind(optim), lr(optim));
    for step in 0..STEPS {
        for batch in shard_loader("mnist", world, 0, step, kind_).iter() {
            let batch = batch.unwrap();
            // The loader hands out float32 images; the f64 yardstick converts them losslessly.
            let loss = CrossEntropyLoss::new()
                .mean(&net.forward_t(&batch.images.to_kind(kind_), false), &batch.labels);
            opt.zero_grad();
            loss.backward();
            opt.step().unwrap();
        }
    }
    vs.float();
    let name = if world == 1 {
        format!("one-{kind_:?}.safetensors")
    } else {
        "unsynchronised.safetensors".to_string()
    };
    save(&vs, out, &name);
}

/// The CNN with dropout switched off, so `train_epoch`'s training mode stays deterministic.
#[derive(Debug)]
struct WithoutDropout(Box<dyn ModuleT>);

impl ModuleT for WithoutDropout {
    fn forward_t(&self, xs: &Tensor, _train: bool) -> Tensor {
        self.0.forward_t(xs, false)
    }
}

/// One rank, `train_epoch` with batch 8 and `accumulate(2)`: one optimizer step per 16 samples.
fn accumulating(optim: &str, out: &Path) {
    let dist = Dist::init().unwrap();
    let (vs, net) = initial("mnist");
    let net = WithoutDropout(net);
    let ddp = Ddp::wrap(&vs, &dist).unwrap();
    let mut opt = Optimizer::new(&vs, kind(optim), lr(optim));
    for step in 0..STEPS {
        let (x, y) = samples("mnist");
        let mut sampler = DistributedSampler::new(16, 1, 0).unwrap();
        sampler.set_epoch(step);
        let mut loader = DataLoader::new(TensorDataset::new(&x, &y, vec![]).unwrap(), 8)
            .sampler(sampler)
            .num_workers(0);
        loader.set_epoch(step);
        let opts = EpochOptions::default().quiet().hooks(&ddp).accumulate(2);
        train_epoch(&net, &mut loader, &mut opt, &CrossEntropyLoss::new(), &opts).unwrap();
    }
    save(&vs, out, "accumulate.safetensors");
}

#[test]
#[ignore = "a rank of the multi-process tests, started by them"]
fn rank_worker() {
    let _turn = common::module_turn(module_path!());
    let scenario = std::env::var("TB_SCENARIO").expect("TB_SCENARIO");
    let out = PathBuf::from(std::env::var("TB_OUT").unwrap_or_default());
    let parts: Vec<&str> = scenario.split(':').collect();
    match parts[..] {
        ["ddp", model, optim] => ddp_rank(model, optim, "default", &out),
        ["ddp", model, optim, variant] => ddp_rank(model, optim, variant, &out),
        ["virtual", model, optim] => virtual_ranks(model, optim, &out),
        ["one", optim, "f32"] => one_process(optim, Kind::Float, 1, &out),
        ["one", optim, "f64"] => one_process(optim, Kind::Double, 1, &out),
        ["one", optim, "half"] => one_process(optim, Kind::Float, 2, &out),
        ["accumulate", optim] => accumulating(optim, &out),
        _ => panic!("unknown scenario {scenario}"),
    }
}

fn tmp(name: &str) -> common::WorkDir {
    common::WorkDir::new(&format!("ddp-{name}"))
}

fn load(dir: &Path, name: &str) -> Vec<(String, Tensor)> {
    common::sorted_tensors(&dir.join(name))
}

/// Parameters only (BatchNorm statistics are compared where their semantics match).
fn params_only(t: Vec<(String, Tensor)>) -> Vec<(String, Tensor)> {
    t.into_iter()
        .filter(|(n, _)| !n.contains("running_") && !n.ends_with("num_batches_tracked"))
        .collect()
}

#[test]
fn two_ranks_equal_one_process_by_construction() {
    let _turn = common::module_turn(module_path!());
    for (model, optim) in
        [("mnist", "sgd"), ("mnist", "adam"), ("resnet", "sgd"), ("resnet", "adam")]
    {
        let dir = tmp(&format!("exact-{model}-{optim}"));
        let stdout = run_ranks(module_path!(), &format!("ddp:{model}:{optim}"), 2, &dir);
        assert!(stdout.contains(&format!("step {}: ranks agree", STEPS - 1)), "{stdout}");
        run_ranks(module_path!(), &format!("virtual:{model}:{optim}"), 1, &dir);
        let (r0, r1) = (load(&dir, "rank0.safetensors"), load(&dir, "rank1.safetensors"));
        assert_eq!(
            common::max_abs_diff(&r0, &r1),
            0.0,
            "{model}/{optim}: ranks ended with different weights or buffers"
        );
        let diff = common::max_abs_diff(&r0, &load(&dir, "virtual.safetensors"));
        println!(
            "{model}/{optim}: 2 ranks x 8 vs one process running both halves: max |diff| {diff:e}"
        );
        assert_eq!(
            diff, 0.0,
            "{model}/{optim}: DDP differs from the same arithmetic in one process"
        );
    }
}

/// torch's other DDP options change where gradients live and when they travel, not the
/// arithmetic: static graph, gradients as bucket views and many small buckets stay exact.
#[test]
fn ddp_options_keep_the_arithmetic() {
    let _turn = common::module_turn(module_path!());
    let dir = tmp("options");
    run_ranks(module_path!(), "virtual:mnist:sgd", 1, &dir);
    let reference = load(&dir, "virtual.safetensors");
    for variant in ["static", "view", "small-buckets"] {
        let stdout = run_ranks(module_path!(), &format!("ddp:mnist:sgd:{variant}"), 2, &dir);
        if variant == "small-buckets" {
            let buckets: usize = stdout
                .lines()
                .find_map(|l| l.strip_prefix("buckets after rebuild: "))
                .and_then(|n| n.trim().parse().ok())
                .expect(&stdout);
            assert!(
                buckets > 1,
                "bucket_cap_mb 0.05 should split the CNN's 1.2M parameters: {stdout}"
            );
        }
        let diff = common::max_abs_diff(&load(&dir, "rank0.safetensors"), &reference);
        println!("mnist/sgd/{variant}: vs one process running both halves: max |diff| {diff:e}");
        assert_eq!(diff, 0.0, "{variant}: DDP with this option changed the arithmetic");
    }
}

/// The compression hooks round each bucket to 16 bits on the way: the ranks still agree
/// exactly, the result is not the float32 one (the hook ran), and it stays far closer to it
/// than a gradient off by the world size would (that doubles every SGD step).
#[test]
fn compression_hooks_round_gradients_but_still_average() {
    let _turn = common::module_turn(module_path!());
    let dir = tmp("hooks");
    run_ranks(module_path!(), "virtual:mnist:sgd", 1, &dir);
    let reference = load(&dir, "virtual.safetensors");
    let moved = common::max_abs_diff(
        &params_only(load(&dir, "init.safetensors")),
        &params_only(load(&dir, "virtual.safetensors")),
    );
    for variant in ["fp16", "bf16"] {
        let stdout = run_ranks(module_path!(), &format!("ddp:mnist:sgd:{variant}"), 2, &dir);
        assert!(stdout.contains(&format!("step {}: ranks agree", STEPS - 1)), "{stdout}");
        let diff = common::max_abs_diff(&load(&dir, "rank0.safetensors"), &reference);
        println!("mnist/sgd/{variant}: vs float32 exchange: max |diff| {diff:e} (weights moved {moved:e})");
        assert!(diff > 0.0, "{variant}: the hook left the gradients untouched");
        assert!(
            diff < 0.05 * moved,
            "{variant}: {diff:e} is not a rounding of the average (weights moved {moved:e})"
        );
    }
}

/// max |w32 - w64| of the one-process run: float32's own rounding error on this computation.
fn rounding_tolerance(dir: &Path, optim: &str) -> (Vec<(String, Tensor)>, f64) {
    run_ranks(module_path!(), &format!("one:{optim}:f32"), 1, dir);
    run_ranks(module_path!(), &format!("one:{optim}:f64"), 1, dir);
    let (f32_, f64_) = (load(dir, "one-Float.safetensors"), load(dir, "one-Double.safetensors"));
    let err = common::max_abs_diff(&f32_, &f64_);
    let largest = f32_.iter().map(|(_, t)| t.abs().max().double_value(&[])).fold(0.0, f64::max);
    (f32_, 4.0 * err + 8.0 * f64::from(f32::EPSILON) * largest)
}

#[test]
fn two_ranks_and_accumulation_match_batch_16_within_rounding() {
    let _turn = common::module_turn(module_path!());
    for optim in ["sgd", "adam"] {
        let dir = tmp(&format!("round-{optim}"));
        let (reference, tol) = rounding_tolerance(&dir, optim);
        run_ranks(module_path!(), &format!("ddp:mnist:{optim}"), 2, &dir);
        run_ranks(module_path!(), &format!("accumulate:{optim}"), 1, &dir);
        let ranks = common::max_abs_diff(&load(&dir, "rank0.safetensors"), &reference);
        let accumulated = common::max_abs_diff(&load(&dir, "accumulate.safetensors"), &reference);
        println!("mnist/{optim}: vs 1 process x 16: 2 ranks x 8 {ranks:e}, accumulate 2 x 8 {accumulated:e} (allowed {tol:e})");
        assert!(
            ranks <= tol,
            "mnist/{optim}: 2 ranks x 8 differ from batch 16 by {ranks:e} > {tol:e}"
        );
        assert!(
            accumulated <= tol,
            "mnist/{optim}: accumulation 2 x 8 differs from batch 16 by {accumulated:e} > {tol:e}"
        );
        // The tolerance must not hide a real bug. A gradient off by the world size doubles
        // SGD's steps, so for SGD it must be far below the distance the weights moved; a
        // gradient never exchanged (a bucket left unsynchronised) trains on half the batch,
        // so for both optimizers it must be far below the distance to that run.
        run_ranks(module_path!(), &format!("one:{optim}:half"), 1, &dir);
        let unsynced = common::max_abs_diff(&load(&dir, "unsynchronised.safetensors"), &reference);
        let moved = common::max_abs_diff(
            &params_only(load(&dir, "init.safetensors")),
            &params_only(reference),
        );
        println!("mnist/{optim}: weights moved {moved:e}; a never-synchronised rank would be {unsynced:e} away");
        assert!(
            tol < 0.1 * unsynced,
            "mnist/{optim}: tolerance {tol:e} would hide an unsynchronised gradient ({unsynced:e})"
        );
        if optim == "sgd" {
            assert!(tol < 0.01 * moved, "mnist/sgd: tolerance {tol:e} would hide a gradient off by the world size ({moved:e})");
        }
    }
}
