//! DDP around a CUDA graph's replay, on the CPU where the graph itself cannot run: what
//! `StepGraph` does with a [`Strategy`] (`set_graph_capture` around the capture, then
//! `before_graph_replay` and `after_graph_replay` around each replay), driven by hand on 3
//! thread ranks with a channels_last ResNet18 in several gradient buckets:
//! - a backward pass run as in the capture exchanges nothing (each rank keeps its own
//!   gradients), and the all-reduce after the replay then leaves every gradient equal, bit for
//!   bit, to what the Reducer's hooks give the same batch. Three ranks, because 1/3 is not
//!   exact (the scaling must be the Reducer's multiplication) and a ring of 3 adds in an order
//!   set by where an element sits in its bucket (the bucket must be laid out as the Reducer's);
//! - the broadcast before the replay gives every rank rank 0's BatchNorm statistics;
//! - DDP names what keeps the step eager (find_unused_parameters, a compression hook), and
//!   nothing otherwise; a loop of one's own (`StepGraph::step_with`) says it.
//!
//! The GPU side (the graph replayed between the two) is `tests/gpu_ranks.rs`'s
//! `graphed_ddp_trains_as_eager_ddp`.
use crate::common;

use trainbook::models::to_channels_last;
use trainbook::prelude::*;
use trainbook::train::{CommHook, DdpOptions, StepGraph, Strategy};

/// Copies of the store's gradients (trainable variables), sorted by name.
fn grads(vs: &VarStore) -> Vec<(String, Tensor)> {
    let mut g: Vec<(String, Tensor)> = vs
        .variables()
        .into_iter()
        .filter(|(_, t)| t.requires_grad())
        .map(|(n, t)| (n, t.grad().copy()))
        .collect();
    g.sort_by(|a, b| a.0.cmp(&b.0));
    g
}

/// The BatchNorm running means and variances, flattened in name order.
fn statistics(vs: &VarStore) -> Vec<f32> {
    let mut b: Vec<(String, Tensor)> =
        vs.variables().into_iter().filter(|(n, _)| n.contains("running_")).collect();
    b.sort_by(|a, b| a.0.cmp(&b.0));
    let parts: Vec<Tensor> = b.iter().map(|(_, t)| t.flatten(0, -1)).collect();
    Vec::try_from(Tensor::cat(&parts, 0)).unwrap()
}

fn equal(a: &[(String, Tensor)], b: &[(String, Tensor)]) -> usize {
    a.iter().zip(b).filter(|((_, x), (_, y))| x.equal(y)).count()
}

/// What one rank saw: (gradients, of them equal to the Reducer's after the exchange, equal to
/// them before it; buckets; BatchNorm statistics before and after the broadcast).
type Seen = ((usize, usize, usize), usize, (Vec<f32>, Vec<f32>));

fn rank(dist: &Dist) -> Result<Seen> {
    let vs = VarStore::new(Device::Cpu);
    let net = resnet18(&vs.root(), 3, HeadKind::Linear);
    to_channels_last(&vs);
    let opts = DdpOptions { bucket_cap_mb: Some(4.0), ..Default::default() };
    let ddp = Ddp::wrap_with(&vs, dist, opts)?;
    assert_eq!(ddp.cuda_graph_blocker(), None);
    let mut opt = Optimizer::sgd(&vs, 0.1, 0.0);
    dist.manual_seed(10 + dist.rank() as i64)?;
    let x = Tensor::randn([2, 3, 32, 32], (Kind::Float, Device::Cpu));
    let y = Tensor::randint(3, [2], (Kind::Int64, Device::Cpu));
    let loss = || CrossEntropyLoss::new().mean(&net.forward_t(&x, true), &y);
    // Two eager steps (no optimizer step: the weights stay): the buckets are rebuilt in the
    // order the gradients arrived after the first.
    for _ in 0..2 {
        ddp.pre_forward(true)?;
        let l = loss();
        opt.zero_grad();
        ddp.run_backward(&l, true)?;
    }
    let reducer = grads(&vs);
    // The step as the capture runs it, then what runs around a replay.
    opt.zero_grad();
    ddp.set_graph_capture(true);
    ddp.pre_forward(true)?;
    let l = loss();
    ddp.run_backward(&l, true)?;
    ddp.set_graph_capture(false);
    let local = grads(&vs);
    let before = statistics(&vs);
    ddp.before_graph_replay()?;
    let after = statistics(&vs);
    ddp.after_graph_replay()?;
    let exchanged = grads(&vs);
    let buckets = ddp.bucket_names()?.len();
    let counts = (reducer.len(), equal(&exchanged, &reducer), equal(&local, &reducer));
    Ok((counts, buckets, (before, after)))
}

#[test]
fn the_exchange_after_a_replay_is_the_reducers() {
    let _turn = common::module_turn(module_path!());
    let ranks = spawn(3, rank).unwrap();
    for (r, ((n, exchanged, local), buckets, _)) in ranks.iter().enumerate() {
        assert!(*buckets > 2, "rank {r}: {buckets} buckets");
        assert_eq!(*exchanged, *n, "rank {r}: gradients equal to the Reducer's, of {n}");
        assert!(*local < *n / 2, "rank {r}: {local} of {n} equal before the exchange");
    }
    let (statistics_0, statistics_1) = (&ranks[0].2, &ranks[1].2);
    assert_ne!(statistics_0.0, statistics_1.0, "each rank's own batch moved its statistics");
    for (r, (_, _, (_, after))) in ranks.iter().enumerate() {
        assert!(*after == statistics_0.0, "rank {r}: rank 0's statistics after the broadcast");
    }
}

#[test]
fn ddp_names_what_keeps_a_graphed_step_eager() {
    let _turn = common::module_turn(module_path!());
    // A loop of one's own under DDP (StepGraph::step_with): the strategy's reason comes first,
    // then the device's.
    let reasons = spawn(2, |dist| {
        let vs = VarStore::new(Device::Cpu);
        let net = MnistNet::new(&vs.root());
        let mut out = Vec::new();
        for (unused, hook) in [
            (true, CommHook::AllReduce),
            (false, CommHook::Bf16Compress),
            (false, CommHook::AllReduce),
        ] {
            let opts = DdpOptions {
                find_unused_parameters: unused,
                comm_hook: hook,
                ..Default::default()
            };
            let ddp = Ddp::wrap_with(&vs, dist, opts)?;
            let mut opt = Optimizer::sgd(&vs, 0.1, 0.0);
            let (x, y) = (
                Tensor::zeros([2, 1, 28, 28], (Kind::Float, Device::Cpu)),
                Tensor::zeros([2], (Kind::Int64, Device::Cpu)),
            );
            let mut graph = StepGraph::new();
            let _ = graph.step_with(&ddp, Device::Cpu, (&x, &y), &mut opt, &mut |x, y| {
                ddp.pre_forward(true)?;
                let output = net.forward_t(x, false);
                let loss = CrossEntropyLoss::new().mean(&output, y);
                ddp.run_backward(&loss, true)?;
                Ok((output, loss))
            })?;
            let grad = vs.variables()["fc2.bias"].grad();
            out.push((
                ddp.cuda_graph_blocker(),
                graph.eager_reason().map(String::from),
                Vec::<f32>::try_from(grad)?,
            ));
        }
        Ok(out)
    })
    .unwrap();
    let [unused, hook, plain] = [&reasons[0][0], &reasons[0][1], &reasons[0][2]];
    assert!(unused.0.as_deref().unwrap().contains("find_unused_parameters"), "{unused:?}");
    assert!(hook.0.as_deref().unwrap().contains("Bf16Compress communication hook"), "{hook:?}");
    assert_eq!(plain.0, None, "nothing in DDP's default options keeps the step eager");
    for (blocker, reason, _) in [unused, hook] {
        assert_eq!(reason, blocker, "step_with says the strategy's reason");
    }
    assert!(plain.1.as_deref().unwrap().contains("not on a CUDA GPU"), "{plain:?}");
    // The eager steps exchanged the gradients: both ranks hold the same (their batches are equal
    // here, so the average is each rank's own).
    for (k, (rank_0, rank_1)) in reasons[0].iter().zip(&reasons[1]).enumerate() {
        assert_eq!(rank_0.2, rank_1.2, "options {k}: the ranks' gradients");
    }
    // A world of one has no Reducer, and nothing to keep out of the graph.
    let vs = VarStore::new(Device::Cpu);
    let _net = MnistNet::new(&vs.root());
    let single = Dist::single(Device::Cpu);
    let opts = DdpOptions { find_unused_parameters: true, ..Default::default() };
    assert_eq!(Ddp::wrap_with(&vs, &single, opts).unwrap().cuda_graph_blocker(), None);
}
