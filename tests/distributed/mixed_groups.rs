//! A PyTorch rank and a trainbook rank in one process group: `tests/oracle/mixed_rank.py` joins
//! with `torch.distributed.init_process_group("gloo", init_method="env://")`, trainbook with
//! `dist::connect` (via `c10d-check` or `Ddp`), under a plain spawner and under torchrun. The
//! group only forms if both lay out the store keys alike, and a collective only completes if
//! both issue the same sequence of the same collectives.
use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::common::ranks::worker_args;
use crate::common::{free_port, text, venv_bin, wait_with_deadline};
use tch::nn::{ModuleT, VarStore};
use tch::{Device, Kind, Tensor};
use trainbook::dist::Dist;
use trainbook::models::{resnet34_classifier, to_safetensors_bytes};
use trainbook::train::Ddp;
use trainbook::train::{named_parameters, CrossEntropyLoss, Optimizer};

const CHECK: &str = env!("CARGO_BIN_EXE_c10d-check");
const STEPS: usize = 3; // as mixed_rank.py
const LR: f64 = 0.05;

fn mixed_rank_py() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/mixed_rank.py")
}

/// The launcher's environment for `rank` of 2 on loopback (rank 0 hosts the store).
fn as_rank(cmd: &mut Command, rank: usize, port: u16) -> &mut Command {
    cmd.env("RANK", rank.to_string())
        .env("LOCAL_RANK", rank.to_string())
        .env("WORLD_SIZE", "2")
        .env("LOCAL_WORLD_SIZE", "2")
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", port.to_string())
        .env("OMP_NUM_THREADS", "1")
        .env("TRAINBOOK_DIST_TIMEOUT", "60")
        .env_remove("TORCHELASTIC_USE_AGENT_STORE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
}

fn python_rank(rank: usize, port: u16, args: &[&str]) -> Child {
    as_rank(Command::new(venv_bin("python")).arg(mixed_rank_py()).args(args), rank, port)
        .spawn()
        .unwrap()
}

/// Waits for every rank; on a failure, shows what all of them printed.
fn finish(children: Vec<(&str, Child)>) -> String {
    let outputs: Vec<_> = children
        .into_iter()
        .map(|(what, child)| (what, wait_with_deadline(child, Duration::from_secs(240), what)))
        .collect();
    if outputs.iter().any(|(_, o)| !o.status.success()) {
        let report: Vec<String> = outputs
            .iter()
            .map(|(what, o)| format!("--- {what} ({}):\n{}", o.status, text(o)))
            .collect();
        panic!("a rank failed\n{}", report.join("\n"));
    }
    outputs.iter().map(|(_, o)| String::from_utf8_lossy(&o.stdout).into_owned()).collect()
}

#[test]
fn a_pytorch_rank_and_a_trainbook_rank_run_collectives_together() {
    let _turn = common::module_turn(module_path!());
    for python in [0, 1] {
        let port = free_port();
        let tb = as_rank(&mut Command::new(CHECK), 1 - python, port).spawn().unwrap();
        let py = python_rank(python, port, &["check"]);
        let stdout = finish(vec![("python rank", py), ("c10d-check rank", tb)]);
        assert!(stdout.contains(&format!("python rank {python}/2: allreduce sum=3 ok, broadcast ok, all_gather ok, barrier ok")), "{stdout}");
        assert!(
            stdout.contains(&format!("c10d-check rank {}/2", 1 - python))
                && stdout.contains("barrier ok"),
            "{stdout}"
        );
    }
}

#[test]
fn a_pytorch_rank_and_a_trainbook_rank_under_torchrun() {
    let _turn = common::module_turn(module_path!());
    // torchrun starts the same command for every rank; local rank 0 becomes the PyTorch rank.
    let script = format!(
        "if [ \"$LOCAL_RANK\" = 0 ]; then exec '{}' '{}' check; else exec '{CHECK}'; fi",
        venv_bin("python").display(),
        mixed_rank_py().display()
    );
    let out = common::run_with_deadline(
        Command::new(venv_bin("torchrun"))
            .args(["--standalone", "--nproc-per-node=2", "--no-python", "bash", "-c", &script])
            .env("OMP_NUM_THREADS", "1")
            .env("TRAINBOOK_DIST_TIMEOUT", "60"),
        Duration::from_secs(240),
        "torchrun with a mixed group",
    );
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("python rank 0/2: allreduce sum=3 ok"), "{stdout}");
    assert!(
        stdout.contains("c10d-check rank 1/2") && stdout.contains("agent store true"),
        "{stdout}"
    );
}

/// trainbook's side of the mixed DDP run: what mixed_rank.py does, through `Ddp`.
fn trainbook_ddp_rank(out: &Path) {
    let dist = Dist::init().unwrap();
    tch::manual_seed(7 + dist.rank() as i64); // replaced by rank 0's weights
    let vs = VarStore::new(Device::Cpu);
    let net = resnet34_classifier(&vs.root(), 3);

    let ddp = Ddp::wrap(&vs, &dist).unwrap();
    let mut opt = Optimizer::sgd(&vs, LR, 0.0);
    tch::manual_seed(100 + dist.rank() as i64); // the batch torch.randn would draw with this seed
    let x = Tensor::randn([4, 3, 48, 40], (Kind::Float, Device::Cpu));
    let y = Tensor::randint(3, [4], (Kind::Int64, Device::Cpu));
    for _ in 0..STEPS {
        ddp.before_forward().unwrap();
        let loss = CrossEntropyLoss::new().mean(&net.forward_t(&x, true), &y);
        opt.zero_grad();
        ddp.backward(&loss).unwrap();
        opt.step().unwrap();
    }
    let params = named_parameters(&vs);
    std::fs::write(
        out.join(format!("trainbook_rank{}.safetensors", dist.rank())),
        to_safetensors_bytes(&params, None).unwrap(),
    )
    .unwrap();
    println!("trainbook rank {}: {STEPS} DDP steps done", dist.rank());
    dist.destroy().unwrap();
}

#[test]
#[ignore = "a rank of the multi-process tests, started by them"]
fn rank_worker() {
    let _turn = common::module_turn(module_path!());
    let out = PathBuf::from(std::env::var("TB_OUT").unwrap_or_default());
    match std::env::var("TB_SCENARIO").as_deref() {
        Ok("ddp") => trainbook_ddp_rank(&out),
        other => panic!("unknown scenario {other:?}"),
    }
}

#[test]
fn pytorch_ddp_and_trainbook_ddp_train_one_resnet34() {
    let _turn = common::module_turn(module_path!());
    let dir = common::WorkDir::new("mixed-ddp");
    let port = free_port();
    let py = python_rank(0, port, &["ddp", dir.to_str().unwrap()]);
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    worker_args(&mut cmd, module_path!(), "ddp", &dir);
    let tb = as_rank(&mut cmd, 1, port).spawn().unwrap();
    let stdout = finish(vec![("python DDP rank 0", py), ("trainbook Ddp rank 1", tb)]);
    assert!(
        stdout.contains("python rank 0: 3 DDP steps done")
            && stdout.contains("trainbook rank 1: 3 DDP steps done"),
        "{stdout}"
    );
    let python = common::sorted_tensors(&dir.join("python_rank0.safetensors"));
    let trainbook = common::sorted_tensors(&dir.join("trainbook_rank1.safetensors"));
    assert_eq!(python.len(), trainbook.len(), "parameter lists differ");
    assert!(python.iter().zip(&trainbook).all(|((a, _), (b, _))| a == b), "parameter names differ");
    let diff = common::max_abs_diff(&python, &trainbook);
    println!("PyTorch DDP rank 0 vs trainbook Ddp rank 1 after {STEPS} steps: max |diff| {diff:e}");
    assert_eq!(diff, 0.0, "the two ranks ended with different weights");
}
