//! DDP when things go wrong, and across torchrun agents: a model with a parameter that is
//! skipped in some steps trains with `find_unused_parameters` and, without it, fails on every
//! rank with a message naming the parameter (never a hang); a rank killed during training ends
//! the others within the timeout with a message (directly and under torchrun); two torchrun
//! agents on loopback form one job.
//!
//! The ranks are this test binary (`common::ranks`).
use crate::common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::ranks::{run_ranks, spawn_ranks, wait_for_line, worker_args};
use tch::nn::{self, Module, ModuleT, VarStore};
use tch::{Device, Kind, Tensor};
use trainbook::dist::Dist;
use trainbook::models::MnistNet;
use trainbook::train::{CrossEntropyLoss, Optimizer};
use trainbook::train::{Ddp, DdpOptions};

/// A trunk and two heads; `head_b` only contributes on even steps.
fn two_headed(find_unused: bool) {
    let dist = Dist::init().unwrap();
    tch::manual_seed(1);
    let vs = VarStore::new(Device::Cpu);
    let trunk = nn::linear(vs.root() / "trunk", 8, 8, Default::default());
    let head_a = nn::linear(vs.root() / "head_a", 8, 3, Default::default());
    let head_b = nn::linear(vs.root() / "head_b", 8, 3, Default::default());
    let ddp = Ddp::wrap_with(
        &vs,
        &dist,
        DdpOptions { find_unused_parameters: find_unused, ..Default::default() },
    )
    .unwrap();
    let mut opt = Optimizer::sgd(&vs, 0.1, 0.0);
    let x = Tensor::randn([4, 8], (Kind::Float, Device::Cpu));
    let y = Tensor::from_slice(&[0i64, 1, 2, 0]);
    for step in 0..6 {
        let result = (|| -> trainbook::Result<()> {
            ddp.before_forward()?;
            let h = trunk.forward(&x).relu();
            let mut logits = head_a.forward(&h);
            if step % 2 == 0 {
                logits += head_b.forward(&h);
            }
            let loss = CrossEntropyLoss::new().mean(&logits, &y);
            opt.zero_grad();
            ddp.backward(&loss)?;
            opt.step().unwrap();
            Ok(())
        })();
        if let Err(e) = result {
            eprintln!("rank {}: step {step} failed: {e}", dist.rank());
            std::process::exit(3);
        }
    }
    let sum: f64 =
        vs.trainable_variables().iter().map(|t| t.sum(Kind::Double).double_value(&[])).sum();
    let all = dist.all_gather(&Tensor::from_slice(&[sum])).unwrap();
    assert!(all.iter().all(|t| t.double_value(&[0]) == sum), "ranks disagree");
    dist.println("trained 6 steps with an intermittently unused head; ranks agree");
    dist.destroy().unwrap();
}

/// Trains until killed, printing its pid; used by the failure tests.
fn forever_rank() {
    let dist = Dist::init().unwrap();
    let vs = VarStore::new(Device::Cpu);
    let net = MnistNet::new(&vs.root());
    let ddp = Ddp::wrap(&vs, &dist).unwrap();
    let mut opt = Optimizer::adam(&vs, 1e-3);
    tch::manual_seed(42);
    let (x, y) = (
        Tensor::randn([16, 1, 28, 28], (Kind::Float, Device::Cpu)),
        Tensor::randint(3, [16], (Kind::Int64, Device::Cpu)),
    );
    println!("rank {} pid {}", dist.rank(), std::process::id());
    for step in 0.. {
        let result = ddp.before_forward().and_then(|_| {
            let loss = CrossEntropyLoss::new().mean(&net.forward_t(&x, false), &y);
            opt.zero_grad();
            ddp.backward(&loss)
        });
        if let Err(e) = result {
            eprintln!("rank {}: training stopped at step {step}: {e}", dist.rank());
            std::process::exit(3);
        }
        opt.step().unwrap();
        if step % 5 == 0 {
            println!("rank {} step {step}", dist.rank());
        }
    }
}

/// Three steps of the MNIST CNN under DDP; ranks must agree; rank files in TB_OUT.
fn agree_rank(out: &std::path::Path) {
    let dist = Dist::init().unwrap();
    tch::manual_seed(7 + dist.rank() as i64);
    let vs = VarStore::new(Device::Cpu);
    let net = MnistNet::new(&vs.root());
    let ddp = Ddp::wrap(&vs, &dist).unwrap();
    let mut opt = Optimizer::adam(&vs, 1e-3);
    tch::manual_seed(100 + dist.rank() as i64); // each rank its own data
    let (x, y) = (
        Tensor::randn([8, 1, 28, 28], (Kind::Float, Device::Cpu)),
        Tensor::randint(10, [8], (Kind::Int64, Device::Cpu)),
    );
    for _ in 0..3 {
        ddp.before_forward().unwrap();
        let loss = CrossEntropyLoss::new().mean(&net.forward_t(&x, false), &y);
        opt.zero_grad();
        ddp.backward(&loss).unwrap();
        opt.step().unwrap();
    }
    std::fs::write(
        out.join(format!("rank{}.safetensors", dist.rank())),
        trainbook::models::to_safetensors_bytes(&trainbook::models::state_dict(&vs), None).unwrap(),
    )
    .unwrap();
    dist.println("3 steps done");
    dist.destroy().unwrap();
}

#[test]
#[ignore = "a rank of the multi-process tests, started by them"]
fn rank_worker() {
    let _turn = common::module_turn(module_path!());
    let scenario = std::env::var("TB_SCENARIO").expect("TB_SCENARIO");
    let out = PathBuf::from(std::env::var("TB_OUT").unwrap_or_default());
    match scenario.as_str() {
        "unused:find" => two_headed(true),
        "unused:strict" => two_headed(false),
        "forever" => forever_rank(),
        "agree" => agree_rank(&out),
        _ => panic!("unknown scenario {scenario}"),
    }
}

fn tmp(name: &str) -> common::WorkDir {
    common::WorkDir::new(&format!("ddpf-{name}"))
}

#[test]
fn unused_parameters_need_find_unused_parameters() {
    let _turn = common::module_turn(module_path!());
    let dir = tmp("unused");
    let stdout = run_ranks(module_path!(), "unused:find", 2, &dir);
    assert!(stdout.contains("ranks agree"), "{stdout}");

    let start = Instant::now();
    let strict = spawn_ranks(module_path!(), "unused:strict", 2, &dir);
    for (rank, child) in strict.into_iter().enumerate() {
        let o = common::wait_with_deadline(
            child,
            Duration::from_secs(120),
            &format!("strict rank {rank}"),
        );
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            o.status.code(),
            Some(3),
            "rank {rank} should fail cleanly\n{}",
            common::text(&o)
        );
        assert!(
            stderr.contains("head_b.weight") && stderr.contains("head_b.bias"),
            "the message must name the unused parameters:\n{stderr}"
        );
        assert!(
            stderr.contains("find_unused_parameters"),
            "the message must name the option:\n{stderr}"
        );
        assert!(
            !stderr.contains("head_a.weight,") && !stderr.contains("trunk.weight,"),
            "only unused parameters are named:\n{stderr}"
        );
    }
    assert!(start.elapsed() < Duration::from_secs(60), "failing took {:?}", start.elapsed());
}

#[test]
fn a_killed_rank_stops_the_others_with_a_message() {
    let _turn = common::module_turn(module_path!());
    let out = tmp("kill");
    let mut children = spawn_ranks(module_path!(), "forever", 2, &out);
    let mut r1_out = std::io::BufReader::new(children[1].stdout.take().unwrap());
    wait_for_line(&mut r1_out, "rank 1 step 10", Duration::from_secs(120));
    let start = Instant::now();
    children[1].kill().unwrap(); // SIGKILL
    let _ = children[1].wait();
    let survivor =
        common::wait_with_deadline(children.remove(0), Duration::from_secs(90), "surviving rank 0");
    let elapsed = start.elapsed();
    let stderr = String::from_utf8_lossy(&survivor.stderr);
    assert_eq!(survivor.status.code(), Some(3), "{}", common::text(&survivor));
    assert!(
        stderr.contains("rank 0: training stopped at step") && stderr.contains("c10d "),
        "{stderr}"
    );
    assert!(elapsed < Duration::from_secs(45), "the survivor took {elapsed:?}");
    println!("survivor exited {elapsed:?} after the kill: {}", stderr.lines().last().unwrap_or(""));

    // Under torchrun the agent notices the dead worker and fails the job.
    let mut cmd = Command::new(common::venv_bin("torchrun"));
    cmd.args(["--standalone", "--nproc-per-node=2", "--no-python"])
        .arg(std::env::current_exe().unwrap());
    worker_args(&mut cmd, module_path!(), "forever", &out);
    let mut run = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut agent_out = std::io::BufReader::new(run.stdout.take().unwrap());
    let pid_line = wait_for_line(&mut agent_out, "rank 1 pid", Duration::from_secs(120));
    let pid = pid_line.trim().rsplit(' ').next().unwrap();
    wait_for_line(&mut agent_out, "step 10", Duration::from_secs(120));
    assert!(Command::new("kill").args(["-9", pid]).status().unwrap().success());
    let o = common::wait_with_deadline(run, Duration::from_secs(120), "torchrun after a kill");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "torchrun should fail: {stderr}");
    assert!(
        stderr.contains("ChildFailedError") || stderr.contains("FAILED"),
        "torchrun should report the failure:\n{stderr}"
    );
}

#[test]
fn two_torchrun_agents_form_one_job_on_loopback() {
    let _turn = common::module_turn(module_path!());
    let out = tmp("multinode");
    let port = common::free_port();
    let agents: Vec<_> = (0..2)
        .map(|node| {
            let mut cmd = Command::new(common::venv_bin("torchrun"));
            cmd.args([
                "--nnodes=2",
                "--nproc-per-node=1",
                "--rdzv-backend=c10d",
                "--rdzv-id=tb-test",
            ])
            .arg(format!("--rdzv-endpoint=127.0.0.1:{port}"))
            .arg(format!("--node-rank={node}"))
            .arg("--no-python")
            .arg(std::env::current_exe().unwrap());
            worker_args(&mut cmd, module_path!(), "agree", &out);
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
        })
        .collect();
    let mut stdout = String::new();
    for (node, agent) in agents.into_iter().enumerate() {
        let o = common::wait_with_deadline(
            agent,
            Duration::from_secs(300),
            &format!("torchrun node {node}"),
        );
        assert!(o.status.success(), "node {node} failed\n{}", common::text(&o));
        stdout.push_str(&String::from_utf8_lossy(&o.stdout));
    }
    assert!(stdout.contains("3 steps done"), "{stdout}");
    assert_eq!(
        common::max_abs_diff(
            &common::sorted_tensors(&out.join("rank0.safetensors")),
            &common::sorted_tensors(&out.join("rank1.safetensors"))
        ),
        0.0
    );
}
