//! The CUDA-graph step (`StepGraph`) where it cannot capture: on the CPU, and with what is not
//! captured (gradient accumulation, float16 loss scaling, anomaly detection), the step runs
//! eagerly, says why, and trains bit for bit as without it; its loop-of-one's-own form
//! (`StepGraph::step`) too. The graphed path itself needs a GPU: tests/gpu_parts/cuda_graphs.rs.
use crate::common;

use std::cell::RefCell;
use std::sync::Mutex;

use tch::nn::VarStore;
use tch::{Device, Tensor};
use trainbook::models::MnistNet;
use trainbook::train::{
    set_detect_anomaly, train_epoch, CrossEntropyLoss, EpochOptions, GradScaler, Optimizer,
    StepGraph,
};

/// The tests of this module seed the process-wide generator: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// One epoch of MnistNet on 24 random digits in batches of 4 (6 steps), with `opts` changed by
/// `tune`: the weights after it.
fn epoch<'a>(tune: impl FnOnce(EpochOptions<'a>) -> EpochOptions<'a>) -> Vec<(String, Tensor)> {
    let mut loader = common::random_mnist_loader(3, 24);
    tch::manual_seed(11);
    let vs = VarStore::new(Device::Cpu);
    let net = MnistNet::new(&vs.root());
    let mut opt = Optimizer::sgd(&vs, 0.05, 0.9);
    let opts = tune(EpochOptions::on(Device::Cpu).quiet());
    tch::manual_seed(12); // the dropout stream
    train_epoch(&net, &mut loader, &mut opt, &CrossEntropyLoss::new(), &opts).unwrap();
    let mut w: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    w.sort_by(|a, b| a.0.cmp(&b.0));
    w
}

fn assert_bitwise(a: &[(String, Tensor)], b: &[(String, Tensor)], what: &str) {
    assert_eq!(a.len(), b.len());
    for ((na, ta), (nb, tb)) in a.iter().zip(b) {
        assert_eq!(na, nb);
        let bits = |t: &Tensor| Vec::<f32>::try_from(t.flatten(0, -1)).unwrap();
        let (x, y) = (bits(ta), bits(tb));
        assert!(x.iter().zip(&y).all(|(p, q)| p.to_bits() == q.to_bits()), "{what}: {na} differs");
    }
}

#[test]
fn on_the_cpu_the_step_runs_eagerly_says_why_and_trains_the_same() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let plain = epoch(|o| o);
    let graph = RefCell::new(StepGraph::new());
    let graphed = epoch(|o| o.cuda_graph(&graph));
    assert_bitwise(&plain, &graphed, "a CPU epoch with a StepGraph");
    let g = graph.borrow();
    assert_eq!((g.replays(), g.eager_steps(), g.is_captured()), (0, 6, false));
    let why = g.eager_reason().expect("a reason once the first step ran");
    assert!(why.contains("Cpu") && why.contains("not on a CUDA GPU"), "{why}");
}

#[test]
fn what_is_not_captured_is_named() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let reason = |graph: RefCell<StepGraph>| graph.into_inner().eager_reason().unwrap().to_string();
    let graph = RefCell::new(StepGraph::new());
    epoch(|o| o.cuda_graph(&graph).accumulate(2));
    let why = reason(graph);
    assert!(why.contains("gradient accumulation (2 micro-batches per step)"), "{why}");
    let (graph, scaler) =
        (RefCell::new(StepGraph::new()), RefCell::new(GradScaler::new(Device::Cpu)));
    epoch(|o| o.cuda_graph(&graph).grad_scaler(&scaler));
    let why = reason(graph);
    assert!(why.contains("GradScaler"), "{why}");
    set_detect_anomaly(true).unwrap();
    let graph = RefCell::new(StepGraph::new());
    epoch(|o| o.cuda_graph(&graph));
    set_detect_anomaly(false).unwrap();
    let why = reason(graph);
    assert!(why.contains("anomaly detection"), "{why}");
}

/// `StepGraph::step` in a loop of one's own: on the CPU it is `zero_grad` and the given
/// forward-backward, so the loop trains as the same loop without it.
#[test]
fn a_loop_of_ones_own_through_step_trains_as_without_it() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let run = |graph: Option<&mut StepGraph>| {
        tch::manual_seed(21);
        let vs = VarStore::new(Device::Cpu);
        let net = MnistNet::new(&vs.root());
        let mut opt = Optimizer::adam(&vs, 1e-3);
        let loss_fn = CrossEntropyLoss::new();
        let mut graph = graph;
        for _ in 0..4 {
            let x = Tensor::randn([4, 1, 28, 28], (tch::Kind::Float, Device::Cpu));
            let y = Tensor::randint(10, [4], (tch::Kind::Int64, Device::Cpu));
            let mut fwd_bwd = |x: &Tensor, y: &Tensor| {
                let out = tch::nn::ModuleT::forward_t(&net, x, true);
                let loss = trainbook::train::Loss::mean(&loss_fn, &out, y);
                loss.backward();
                Ok((out, loss))
            };
            match graph.as_deref_mut() {
                Some(g) => drop(g.step(Device::Cpu, (&x, &y), &mut opt, &mut fwd_bwd).unwrap()),
                None => {
                    opt.zero_grad();
                    drop(fwd_bwd(&x, &y).unwrap());
                }
            }
            opt.step().unwrap();
        }
        let mut w: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
        w.sort_by(|a, b| a.0.cmp(&b.0));
        w
    };
    let mut graph = StepGraph::new();
    let with = run(Some(&mut graph));
    assert_bitwise(&run(None), &with, "a loop through StepGraph::step on the CPU");
    assert_eq!((graph.replays(), graph.eager_steps()), (0, 4));
    assert!(graph.eager_reason().unwrap().contains("not on a CUDA GPU"));
}
