//! Data-parallel training across real processes (Gloo): 2 ranks x batch 8 end with the same
//! weights as 1 process x batch 16 (MNIST CNN) or as torch DDP's per-rank BatchNorm semantics
//! (ResNet34), ranks agree after every step, evaluation is exact across ranks, a killed rank
//! makes the others fail fast with a message, and two torchrun agents form one job on loopback.
//!
//! The ranks are this same test binary, started with `--ignored --exact rank_worker` and the
//! scenario in `TB_SCENARIO`.
mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tch::nn::{ModuleT, VarStore};
use tch::{Device, Kind, Tensor};
use trainbook::data::{DataLoader, DistributedSampler, TensorDataset};
use trainbook::dist::{Ddp, Dist};
use trainbook::models::{load_state_dict, resnet34_classifier, state_dict, to_safetensors_bytes, MnistNet};
use trainbook::train::{evaluate, CrossEntropyLoss, EpochOptions, Optimizer, OptimizerKind, StepHooks};

const STEPS: u64 = 3;

fn kind(name: &str) -> OptimizerKind {
    if name == "sgd" { OptimizerKind::Sgd { momentum: 0.9, dampening: 0.0, nesterov: false, weight_decay: 1e-4 } } else { OptimizerKind::adam() }
}

/// 16 fixed samples, identical on every rank.
fn samples(model: &str) -> (Tensor, Tensor) {
    tch::manual_seed(42);
    let shape: [i64; 4] = if model == "mnist" { [16, 1, 28, 28] } else { [16, 3, 48, 40] };
    (Tensor::randn(shape, (Kind::Float, Device::Cpu)), Tensor::randint(3, [16], (Kind::Int64, Device::Cpu)))
}

fn build(model: &str, vs: &VarStore) -> Box<dyn ModuleT> {
    if model == "mnist" { Box::new(MnistNet::new(&vs.root())) } else { Box::new(resnet34_classifier(&vs.root(), 3)) }
}

/// Sum of all parameters (buffers such as BatchNorm statistics legitimately differ between
/// ranks after a forward pass, until the next broadcast).
fn checksum(vs: &VarStore) -> f64 {
    trainbook::train::named_parameters(vs).iter().map(|(_, t)| t.to_kind(Kind::Double).sum(Kind::Double).double_value(&[])).sum()
}

/// One rank of the equivalence scenario: DistributedSampler, Ddp, STEPS optimizer steps.
fn equivalence_rank(model: &str, optim: &str, out: &Path) {
    let dist = Dist::init().unwrap();
    tch::manual_seed(7 + dist.rank() as i64); // different on purpose: Ddp::wrap must fix it
    let vs = VarStore::new(Device::Cpu);
    let net = build(model, &vs);
    let ddp = Ddp::wrap(&vs, &dist).unwrap();
    let mut opt = Optimizer::new(&vs, kind(optim), if optim == "sgd" { 0.05 } else { 1e-3 });
    let (x, y) = samples(model);
    let train = model != "mnist"; // BatchNorm in training mode; the CNN without dropout
    let loss_fn = CrossEntropyLoss::new();
    let sampler = DistributedSampler::new(16, dist.world_size(), dist.rank()).unwrap();
    let mut loader = DataLoader::new(TensorDataset::new(&x, &y, vec![]).unwrap(), 16 / dist.world_size()).sampler(sampler).num_workers(0);
    for step in 0..STEPS {
        loader.set_epoch(step);
        for batch in loader.iter() {
            let batch = batch.unwrap();
            ddp.before_forward().unwrap();
            let loss = loss_fn.mean(&net.forward_t(&batch.images, train), &batch.labels);
            opt.zero_grad();
            loss.backward();
            ddp.after_backward().unwrap();
            opt.step();
        }
        let sums = dist.all_gather(&Tensor::from_slice(&[checksum(&vs)])).unwrap();
        let sums: Vec<f64> = sums.iter().map(|t| t.double_value(&[0])).collect();
        assert!(sums.iter().all(|s| *s == sums[0]), "ranks disagree after step {step}: {sums:?}");
        dist.println(format!("step {step}: ranks agree (checksum {:.6})", sums[0]));
    }
    // Before the next forward pass DDP makes every rank use rank 0's BatchNorm statistics.
    ddp.before_forward().unwrap();
    std::fs::write(out.join(format!("rank{}.safetensors", dist.rank())), to_safetensors_bytes(&state_dict(&vs), None).unwrap()).unwrap();
    dist.destroy().unwrap();
}

/// Exact evaluation over 15 samples split (with padding) between the ranks.
fn metrics_rank(out: &Path) {
    let dist = Dist::init().unwrap();
    tch::manual_seed(3);
    let vs = VarStore::new(Device::Cpu);
    let net = MnistNet::new(&vs.root());
    let ddp = Ddp::wrap(&vs, &dist).unwrap();
    tch::manual_seed(9);
    let x = Tensor::randn([15, 1, 28, 28], (Kind::Float, Device::Cpu));
    let y = Tensor::randint(10, [15], (Kind::Int64, Device::Cpu));
    let ds = TensorDataset::new(&x, &y, (0..10).map(|i| i.to_string()).collect()).unwrap();
    let sampler = DistributedSampler::new(15, dist.world_size(), dist.rank()).unwrap().shuffle(true);
    let mut loader = DataLoader::new(ds, 4).sampler(sampler).num_workers(0);
    let s = evaluate(&net, &mut loader, &CrossEntropyLoss::new(), &EpochOptions::default().quiet().hooks(&ddp)).unwrap();
    let json = serde_json::json!({"loss": s.loss, "accuracy": s.accuracy, "samples": s.samples, "confusion": s.confusion.unwrap().counts});
    std::fs::write(out.join(format!("metrics{}.json", dist.rank())), json.to_string()).unwrap();
    dist.destroy().unwrap();
}

/// Trains until killed, printing its pid; used by the failure tests.
fn forever_rank() {
    let dist = Dist::init().unwrap();
    let vs = VarStore::new(Device::Cpu);
    let net = MnistNet::new(&vs.root());
    let ddp = Ddp::wrap(&vs, &dist).unwrap();
    let mut opt = Optimizer::adam(&vs, 1e-3);
    let (x, y) = samples("mnist");
    println!("rank {} pid {}", dist.rank(), std::process::id());
    for step in 0.. {
        let loss = CrossEntropyLoss::new().mean(&net.forward_t(&x, false), &y);
        opt.zero_grad();
        loss.backward();
        if let Err(e) = ddp.after_backward() {
            eprintln!("rank {}: training stopped at step {step}: {e}", dist.rank());
            std::process::exit(3);
        }
        opt.step();
        if step % 5 == 0 {
            println!("rank {} step {step}", dist.rank());
        }
    }
}

#[test]
#[ignore = "a rank of the multi-process tests, started by them"]
fn rank_worker() {
    let scenario = std::env::var("TB_SCENARIO").expect("TB_SCENARIO");
    let out = PathBuf::from(std::env::var("TB_OUT").unwrap_or_default());
    let parts: Vec<&str> = scenario.split(':').collect();
    match parts[..] {
        ["equivalence", model, optim] => equivalence_rank(model, optim, &out),
        ["metrics"] => metrics_rank(&out),
        ["forever"] => forever_rank(),
        _ => panic!("unknown scenario {scenario}"),
    }
}

fn worker_args(cmd: &mut Command, scenario: &str, out: &Path) {
    cmd.args(["--ignored", "--exact", "rank_worker", "--nocapture", "--test-threads=1"])
        .env("TB_SCENARIO", scenario)
        .env("TB_OUT", out)
        .env("OMP_NUM_THREADS", "1")
        .env("TRAINBOOK_DIST_TIMEOUT", "30");
}

/// Runs `scenario` on `world` ranks started directly (rank 0 hosts the store).
fn spawn_ranks(scenario: &str, world: usize, out: &Path) -> Vec<std::process::Child> {
    let port = common::free_port();
    (0..world)
        .map(|rank| {
            let mut cmd = Command::new(std::env::current_exe().unwrap());
            worker_args(&mut cmd, scenario, out);
            cmd.env("RANK", rank.to_string())
                .env("LOCAL_RANK", rank.to_string())
                .env("WORLD_SIZE", world.to_string())
                .env("LOCAL_WORLD_SIZE", world.to_string())
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", port.to_string())
                .env_remove("TORCHELASTIC_USE_AGENT_STORE")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect()
}

fn run_ranks(scenario: &str, world: usize, out: &Path) {
    for (rank, child) in spawn_ranks(scenario, world, out).into_iter().enumerate() {
        let o = common::wait_with_deadline(child, Duration::from_secs(300), &format!("{scenario} rank {rank}"));
        assert!(o.status.success(), "{scenario} rank {rank} failed\n{}", common::text(&o));
    }
}

fn tmp(name: &str) -> common::WorkDir {
    common::WorkDir::new(&format!("ddp-{name}"))
}

/// The reference for ResNet34: one process that reproduces torch DDP's semantics with two
/// "virtual ranks": each half-batch goes through BatchNorm separately, gradients are the mean
/// of the two halves' mean losses, and the running statistics are rank 0's.
fn resnet_reference(optim: &str) -> Vec<(String, Tensor)> {
    let vs = VarStore::new(Device::Cpu);
    let net = build("resnet", &vs);
    let mut init = VarStore::new(Device::Cpu);
    tch::manual_seed(7);
    let _ = build("resnet", &init); // rank 0's initial weights, as Ddp::wrap broadcasts them
    let mut vs = vs;
    load_state_dict(&mut vs, &state_dict(&init), true).unwrap();
    init.freeze();
    let mut opt = Optimizer::new(&vs, kind(optim), if optim == "sgd" { 0.05 } else { 1e-3 });
    let (x, y) = samples("resnet");
    let buffers: Vec<Tensor> = vs.variables().into_iter().filter(|(n, _)| n.contains("running_")).map(|(_, t)| t).collect();
    let snapshot = |bs: &[Tensor]| bs.iter().map(|t| t.copy()).collect::<Vec<_>>();
    let restore = |bs: &[Tensor], saved: &[Tensor]| tch::no_grad(|| bs.iter().zip(saved).for_each(|(b, s)| { let _ = b.shallow_clone().copy_(s); }));
    for step in 0..STEPS {
        let halves: Vec<Vec<i64>> = (0..2).map(|r| {
            let mut s = DistributedSampler::new(16, 2, r).unwrap();
            s.set_epoch(step);
            s.indices().into_iter().map(|i| i as i64).collect()
        }).collect();
        let start = snapshot(&buffers);
        let pick = |h: &Vec<i64>| { let idx = Tensor::from_slice(h); (x.index_select(0, &idx), y.index_select(0, &idx)) };
        opt.zero_grad();
        // Backward right after each half (the restores below modify buffers that the forward
        // pass saved); gradients accumulate to the mean of the two halves' mean losses.
        let (xa, ya) = pick(&halves[0]);
        (CrossEntropyLoss::new().mean(&net.forward_t(&xa, true), &ya) / 2.0).backward();
        let after_rank0 = snapshot(&buffers);
        restore(&buffers, &start);
        let (xb, yb) = pick(&halves[1]);
        (CrossEntropyLoss::new().mean(&net.forward_t(&xb, true), &yb) / 2.0).backward();
        restore(&buffers, &after_rank0);
        opt.step();
    }
    state_dict(&vs)
}

#[test]
fn two_ranks_equal_one_process() {
    for (model, optim) in [("mnist", "sgd"), ("mnist", "adam"), ("resnet", "sgd"), ("resnet", "adam")] {
        let scenario = format!("equivalence:{model}:{optim}");
        let two = tmp(&format!("{model}-{optim}-2"));
        run_ranks(&scenario, 2, &two);
        let (r0, r1) = (common::sorted_tensors(&two.join("rank0.safetensors")), common::sorted_tensors(&two.join("rank1.safetensors")));
        assert_eq!(common::max_abs_diff(&r0, &r1), 0.0, "{scenario}: ranks ended with different weights or buffers");
        let reference = if model == "mnist" {
            let one = tmp(&format!("{model}-{optim}-1"));
            run_ranks(&scenario, 1, &one);
            common::sorted_tensors(&one.join("rank0.safetensors"))
        } else {
            resnet_reference(optim)
        };
        let diff = common::max_abs_diff(&r0, &reference);
        println!("{scenario}: 2 ranks x 8 vs reference: max |diff| {diff:e}");
        assert!(diff <= 1e-5, "{scenario}: max |diff| {diff}");
    }
}

#[test]
fn evaluation_is_exact_across_ranks() {
    let (one, two) = (tmp("metrics-1"), tmp("metrics-2"));
    run_ranks("metrics", 1, &one);
    run_ranks("metrics", 2, &two);
    let read = |p: PathBuf| -> serde_json::Value { serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap() };
    let (a, b, b1) = (read(one.join("metrics0.json")), read(two.join("metrics0.json")), read(two.join("metrics1.json")));
    assert_eq!(b["samples"], 15, "padding must not be counted: {b}");
    assert_eq!(a["accuracy"], b["accuracy"]);
    assert_eq!(a["confusion"], b["confusion"]);
    assert_eq!(b, b1, "every rank holds the global result");
    let (la, lb) = (a["loss"].as_f64().unwrap(), b["loss"].as_f64().unwrap());
    // Per-sample losses come from float32 kernels run on different batch groupings.
    assert!((la - lb).abs() <= 1e-6 * la.abs(), "loss {la} vs {lb}");
}

fn wait_for_line(reader: &mut impl std::io::BufRead, needle: &str, limit: Duration) -> String {
    let start = Instant::now();
    let mut seen = String::new();
    let mut line = String::new();
    while start.elapsed() < limit {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        seen.push_str(&line);
        if line.contains(needle) {
            return line;
        }
    }
    panic!("no line with {needle:?} within {limit:?}; output so far:\n{seen}");
}

#[test]
fn a_killed_rank_stops_the_others_with_a_message() {
    let out = tmp("kill");
    let mut children = spawn_ranks("forever", 2, &out);
    let mut r1_out = std::io::BufReader::new(children[1].stdout.take().unwrap());
    wait_for_line(&mut r1_out, "rank 1 step 10", Duration::from_secs(120));
    let start = Instant::now();
    children[1].kill().unwrap(); // SIGKILL
    let _ = children[1].wait();
    let survivor = common::wait_with_deadline(children.remove(0), Duration::from_secs(90), "surviving rank 0");
    let elapsed = start.elapsed();
    let stderr = String::from_utf8_lossy(&survivor.stderr);
    assert_eq!(survivor.status.code(), Some(3), "{}", common::text(&survivor));
    assert!(stderr.contains("rank 0: training stopped at step") && stderr.contains("c10d allreduce"), "{stderr}");
    assert!(elapsed < Duration::from_secs(45), "the survivor took {elapsed:?}");
    println!("survivor exited {elapsed:?} after the kill: {}", stderr.lines().last().unwrap_or(""));

    // Under torchrun the agent notices the dead worker and fails the job.
    let mut cmd = Command::new(common::venv_bin("torchrun"));
    cmd.args(["--standalone", "--nproc-per-node=2", "--no-python"]).arg(std::env::current_exe().unwrap());
    worker_args(&mut cmd, "forever", &out);
    let mut run = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut agent_out = std::io::BufReader::new(run.stdout.take().unwrap());
    let pid_line = wait_for_line(&mut agent_out, "rank 1 pid", Duration::from_secs(120));
    let pid = pid_line.trim().rsplit(' ').next().unwrap();
    wait_for_line(&mut agent_out, "step 10", Duration::from_secs(120));
    assert!(Command::new("kill").args(["-9", pid]).status().unwrap().success());
    let o = common::wait_with_deadline(run, Duration::from_secs(120), "torchrun after a kill");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "torchrun should fail: {stderr}");
    assert!(stderr.contains("ChildFailedError") || stderr.contains("FAILED"), "torchrun should report the failure:\n{stderr}");
}

#[test]
fn two_torchrun_agents_form_one_job_on_loopback() {
    let out = tmp("multinode");
    let port = common::free_port();
    let agents: Vec<_> = (0..2)
        .map(|node| {
            let mut cmd = Command::new(common::venv_bin("torchrun"));
            cmd.args(["--nnodes=2", "--nproc-per-node=1", "--rdzv-backend=c10d", "--rdzv-id=tb-test"])
                .arg(format!("--rdzv-endpoint=127.0.0.1:{port}"))
                .arg(format!("--node-rank={node}"))
                .arg("--no-python")
                .arg(std::env::current_exe().unwrap());
            worker_args(&mut cmd, "equivalence:mnist:adam", &out);
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
        })
        .collect();
    let mut stdout = String::new();
    for (node, agent) in agents.into_iter().enumerate() {
        let o = common::wait_with_deadline(agent, Duration::from_secs(300), &format!("torchrun node {node}"));
        assert!(o.status.success(), "node {node} failed\n{}", common::text(&o));
        stdout.push_str(&String::from_utf8_lossy(&o.stdout));
    }
    assert!(stdout.contains(&format!("step {}: ranks agree", STEPS - 1)), "{stdout}");
    assert_eq!(common::max_abs_diff(&common::sorted_tensors(&out.join("rank0.safetensors")), &common::sorted_tensors(&out.join("rank1.safetensors"))), 0.0);
}
