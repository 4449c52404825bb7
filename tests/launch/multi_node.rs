//! Several nodes under torchrun, on one machine: two torchrun agents as two nodes
//! (`--nnodes=2 --nproc-per-node=2`, the c10d rendezvous on 127.0.0.1) train the MNIST example
//! as 4 ranks to the same bytes of `model.safetensors` as `torchrun --standalone
//! --nproc-per-node=4` (one thread per rank in both, so the same kernels in the same order).
//! What a real cluster adds (other hosts, their network) is not run here.
use crate::common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

const ARGS: [&str; 7] = ["--epochs", "1", "--workers", "1", "--save-every", "0", "--no-resume"];

/// The MNIST example under torchrun with `launch` (its flags before `--no-python`).
fn torchrun(launch: &[String], data: &Path, out: &Path) -> Command {
    let mut cmd = Command::new(common::venv_bin("torchrun"));
    cmd.args(launch)
        .arg("--no-python")
        .arg(common::target_exe("examples/mnist"))
        .args(ARGS)
        .arg("--data")
        .arg(data)
        .arg("--out")
        .arg(out)
        // torchrun sets OMP_NUM_THREADS=1 only for several processes per node; both runs get it.
        .env("OMP_NUM_THREADS", "1")
        .env("TRAINBOOK_DIST_TIMEOUT", "60");
    cmd
}

fn run(mut cmd: Command, what: &str) -> Output {
    let o = common::run_with_deadline(&mut cmd, Duration::from_secs(600), what);
    assert!(o.status.success(), "{what} failed:\n{}", common::text(&o));
    o
}

#[test]
fn two_torchrun_nodes_train_to_the_bytes_of_one_standalone_node() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("multi-node");
    let data = work.join("mnist");
    common::offline_mnist(&data);

    let port = trainbook::dist::free_port().unwrap();
    let node = || -> Vec<String> {
        [
            "--nnodes=2",
            "--nproc-per-node=2",
            "--rdzv-backend=c10d",
            &format!("--rdzv-endpoint=127.0.0.1:{port}"),
            "--rdzv-id=trainbook-multi-node",
        ]
        .map(String::from)
        .to_vec()
    };
    let two = work.join("two-nodes");
    let nodes: Vec<Output> = std::thread::scope(|s| {
        let runs: Vec<_> = (0..2)
            .map(|n| {
                let cmd = torchrun(&node(), &data, &two);
                s.spawn(move || run(cmd, &format!("torchrun node {n} of 2")))
            })
            .collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    let said: String = nodes.iter().map(common::text).collect();
    assert!(said.contains("4 rank(s) via torchrun"), "{said}");

    let one = work.join("one-node");
    let standalone = ["--standalone".to_string(), "--nproc-per-node=4".to_string()];
    run(torchrun(&standalone, &data, &one), "torchrun --standalone");

    let (a, b) = (one.join("model.safetensors"), two.join("model.safetensors"));
    assert_eq!(
        std::fs::read(&a).unwrap(),
        std::fs::read(&b).unwrap(),
        "two nodes of 2 and one node of 4 end on the same bytes"
    );
}
