//! trainbook programs under launchers other than torchrun: a local Ray (launchers/ray_launch.py),
//! a Dask LocalCluster (launchers/dask_launch.py), Open MPI's mpirun, and the environments that
//! srun and MPICH's mpiexec give their tasks. The MNIST example trains as 2 ranks under each
//! real launcher; Ray also loses a rank mid-run and the restarted group resumes from the
//! checkpoint. These runs are heavy for 2 cores, so they take turns.
use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::Duration;

use trainbook::train::read_records;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The offline MNIST in `work/mnist`.
fn mnist_data(work: &Path) -> PathBuf {
    let dir = work.join("mnist");
    common::offline_mnist(&dir);
    dir
}

fn launcher(script: &str, args: &[&str], program: &[&str], cwd: &Path) -> Output {
    launcher_env(script, args, program, cwd, &[])
}

/// `launchers/SCRIPT ARGS -- PROGRAM` with extra environment for the launcher (and its workers).
fn launcher_env(
    script: &str,
    args: &[&str],
    program: &[&str],
    cwd: &Path,
    env: &[(&str, &str)],
) -> Output {
    let mut cmd = Command::new(common::venv_bin("python"));
    cmd.arg(Path::new(ROOT).join("launchers").join(script))
        .args(args)
        .arg("--")
        .args(program)
        .current_dir(cwd)
        .env("TRAINBOOK_DIST_TIMEOUT", "60");
    cmd.envs(env.iter().copied());
    common::run_with_deadline(&mut cmd, Duration::from_secs(900), script)
}

fn mnist_args(work: &Path, out: &Path, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        common::target_exe("examples/mnist").display().to_string(),
        "--data".into(),
        mnist_data(work).display().to_string(),
    ];
    args.extend(["--epochs", "1", "--workers", "1", "--out"].map(String::from));
    args.push(out.display().to_string());
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// The MNIST run finished as one 2-rank job: one record, written by rank 0 only.
fn assert_trained(out: &Path, output: &Output, launcher: &str) {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", common::text(output));
    assert!(
        stdout.contains(&format!("2 rank(s) via {launcher}")),
        "rank 0 reports its launcher:\n{stdout}"
    );
    let records = read_records(&out.join("metrics.jsonl")).unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].world_size, 2);
    assert!(records[0].val_acc.unwrap() > 0.85, "{:?}", records[0]);
}

#[test]
fn ray_runs_mnist_as_two_ranks_and_restarts_after_a_lost_rank() {
    let _turn = common::module_turn(module_path!());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new("launch-ray");
    let out = work.join("run");
    // On the first attempt rank 1 is SIGKILLed as soon as the first step checkpoint exists.
    let args = mnist_args(&work, &out, &["--save-every-steps", "20"]);
    let script = format!(
        "if [ \"$RANK\" = 1 ] && [ \"$TRAINBOOK_RESTART_COUNT\" = 0 ]; then \
           ( until ls '{ckpt}' 2>/dev/null | grep -q '^step-'; do sleep 0.05; done; kill -9 $$ ) & \
         fi; exec \"$@\"",
        ckpt = out.join("checkpoints").display()
    );
    let mut program = vec!["bash", "-c", &script, "rank"];
    program.extend(args.iter().map(String::as_str));
    let o = launcher(
        "ray_launch.py",
        &["--num-workers", "2", "--num-cpus", "2", "--max-failures", "1"],
        &program,
        &work,
    );
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    println!("{stdout}\n{stderr}");
    assert!(
        stderr.contains("attempt 1/2 failed") && stderr.contains("rank 1 was killed by SIGKILL"),
        "{stderr}"
    );
    assert!(stderr.contains("all ranks finished (attempt 2/2"), "{stderr}");
    assert!(
        stdout.contains("resuming from"),
        "the second attempt resumes from the checkpoint:\n{stdout}"
    );
    assert_trained(&out, &o, "ray");
}

/// Ray gives a local node 30 s to start and then raises; on a busy machine that can pass (it
/// did, for notebook 05 beside three heavy tests on 2 cores). `start_local_ray` starts it again,
/// killing what the failed try had started, up to `LOCAL_START_TRIES` times; other errors go
/// through at once. Where the launcher may raise its priority (root), ray.init runs raised by
/// `NODE_PRIORITY_BOOST` nice levels, in a session (autogroup) raised by `AUTOGROUP_BOOST`, both
/// set back after; a rank started there gives the nice levels back.
/// ray.init is replaced here, so no Ray starts.
#[test]
fn ray_starts_a_local_node_again_after_rays_start_up_timeout() {
    let _turn = common::module_turn(module_path!());
    let script = r#"
import subprocess, sys
import ray_launch
TIMEOUT = "The current node timed out during startup. This could happen because ..."
tries, started = [], []
def slow_then_fine(**init):
    tries.append(init)
    if len(tries) == 1:
        started.append(subprocess.Popen(["sleep", "60"]))  # what a failed try leaves running
        raise Exception(TIMEOUT)
ray_launch.ray.init = slow_then_fine
ray_launch.start_local_ray({"address": None, "num_cpus": 2})
print("tries", len(tries), tries[1], "left over:", started[0].wait(timeout=10))
def bad(**init):
    tries.append(init)
    raise ValueError("not a timeout")
tries.clear()
ray_launch.ray.init = bad
try:
    ray_launch.start_local_ray({})
except ValueError:
    print("other error: tries", len(tries))
def never(**init):
    tries.append(init)
    raise Exception(TIMEOUT)
tries.clear()
ray_launch.ray.init = never
try:
    ray_launch.start_local_ray({})
except Exception as e:
    print("always slow: every try", len(tries) == ray_launch.LOCAL_START_TRIES, "raised:", "timed out" in str(e))
import os
from launch_common import NODE_BOOST_ENV, start_rank
def seen(**init):
    tries.append((os.getpriority(os.PRIO_PROCESS, 0), os.environ.get(NODE_BOOST_ENV), ray_launch.autogroup_nice()))
tries.clear()
ray_launch.ray.init = seen
before, group = os.getpriority(os.PRIO_PROCESS, 0), ray_launch.autogroup_nice()
ray_launch.start_local_ray({})
with ray_launch.node_processes_first():
    rank = start_rank([sys.executable, "-c", "import os; print(os.getpriority(os.PRIO_PROCESS, 0))"], {})
    rank_nice = int(rank.stdout.read())
    rank.wait()
after = os.getpriority(os.PRIO_PROCESS, 0)
boost = ray_launch.NODE_PRIORITY_BOOST
raised_group = None if group is None else max(group - ray_launch.AUTOGROUP_BOOST, -20)
want = (before - boost, str(boost), raised_group) if os.geteuid() == 0 else (before, None, group)
print("priority", tries, "rank", rank_nice, "before", before, group, "after", after, ray_launch.autogroup_nice())
print("priority as expected:", tries == [want] and rank_nice == before and (after, ray_launch.autogroup_nice()) == (before, group))
"#;
    let o = Command::new(common::venv_bin("python"))
        .args(["-c", script])
        .current_dir(Path::new(ROOT).join("launchers"))
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("tries 2 {'address': None, 'num_cpus': 2} left over: -9"),
        "started again with the same settings, the first try's process killed: {stdout}"
    );
    assert!(stdout.contains("other error: tries 1"), "{stdout}");
    assert!(stdout.contains("always slow: every try True raised: True"), "{stdout}");
    assert!(stderr.contains("starting it again (try 2 of "), "{stderr}");
    assert!(stdout.contains("priority as expected: True"), "{stdout}");
}

#[test]
fn ray_reports_a_failing_rank_with_its_status() {
    let _turn = common::module_turn(module_path!());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new("launch-ray-fail");
    // Rank 1 fails once rank 0 has printed (else rank 0 may be stopped before its first line).
    let program = [
        "bash",
        "-c",
        "echo \"rank $RANK of $WORLD_SIZE\"; if [ \"$RANK\" = 1 ]; then until [ -e rank0-spoke ]; do sleep 0.05; done; exit 7; fi; touch rank0-spoke; sleep 60",
    ];
    let o = launcher("ray_launch.py", &["--num-workers", "2", "--num-cpus", "2"], &program, &work);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(7), "{}", common::text(&o));
    assert!(
        stderr.contains("rank 1 exited with code 7") && stderr.contains("rank 1 of 2"),
        "{stderr}"
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("rank 0 of 2"),
        "rank 0's output is streamed"
    );
}

#[test]
fn dask_runs_mnist_as_two_ranks_one_per_worker() {
    let _turn = common::module_turn(module_path!());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new("launch-dask");
    let out = work.join("run");
    let args = mnist_args(&work, &out, &[]);
    let program: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = launcher(
        "dask_launch.py",
        &["--local-workers", "2", "--num-workers", "2"],
        &program,
        &work,
    );
    println!("{}", common::text(&o));
    assert_trained(&out, &o, "dask");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).matches("epoch 1/1").count(),
        1,
        "rank 0's output, once"
    );
}

#[test]
fn dask_retries_the_group_and_refuses_too_few_workers() {
    let _turn = common::module_turn(module_path!());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new("launch-dask-retry");
    // First attempt: rank 1 fails before joining; the retried group runs c10d-check to the end.
    let marker = work.join("failed-once");
    let script = format!(
        "echo \"rank $RANK sees GPUs $CUDA_VISIBLE_DEVICES, malloc trim ${{MALLOC_TRIM_THRESHOLD_:-default}}\"; if [ \"$RANK\" = 1 ] && [ ! -e '{m}' ]; then touch '{m}'; exit 5; fi; exec \"$@\"",
        m = marker.display()
    );
    let check = common::target_exe("c10d-check").display().to_string();
    // Workers that see several GPUs (as dask-cuda starts them, their own first) give their rank one.
    let args = ["--local-workers", "2", "--num-workers", "2", "--max-failures", "1"];
    let o = launcher_env(
        "dask_launch.py",
        &args,
        &["bash", "-c", &script, "rank", &check],
        &work,
        &[("CUDA_VISIBLE_DEVICES", "3,0,1,2")],
    );
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("rank 1 exited with code 5")
            && stderr.contains("all ranks finished (attempt 2/2"),
        "{stderr}"
    );
    assert!(
        stdout.contains("c10d-check rank 0/2 (via dask")
            && stdout.contains("rank 0 sees GPUs 3, malloc trim default\n"),
        "{stdout}"
    );

    let o = launcher(
        "dask_launch.py",
        &["--local-workers", "1", "--num-workers", "2", "--wait-for-workers", "1"],
        &["true"],
        &work,
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success()
            && stderr.contains("the cluster has 1 worker(s) but 2 ranks were asked for"),
        "{stderr}"
    );
}

#[test]
fn mpirun_runs_mnist_as_two_ranks() {
    let _turn = common::module_turn(module_path!());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new("launch-mpi");
    let out = work.join("run");
    let port = format!("MASTER_PORT={}", common::free_port());
    let mut cmd = Command::new("mpirun");
    // As root (CI), Open MPI wants to be told; --oversubscribe: 2 ranks even where it counts 1 slot.
    cmd.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "-np",
        "2",
        "-x",
        &port,
        "-x",
        "TRAINBOOK_DIST_TIMEOUT=60",
    ])
    .args(mnist_args(&work, &out, &[]))
    .current_dir(&work);
    let o = common::run_with_deadline(&mut cmd, Duration::from_secs(900), "mpirun examples/mnist");
    println!("{}", common::text(&o));
    assert_trained(&out, &o, "open-mpi");
}

/// srun and MPICH's mpiexec cannot run here, so two processes get the variables they set.
#[test]
fn slurm_and_pmi_environments_form_a_group() {
    let _turn = common::module_turn(module_path!());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    type RankVars = fn(usize) -> Vec<(String, String)>;
    let layouts: [(&str, RankVars); 2] = [
        ("slurm (srun)", |r| {
            [
                ("SLURM_PROCID", r.to_string()),
                ("SLURM_LOCALID", r.to_string()),
                ("SLURM_NTASKS", "2".into()),
                ("SLURM_STEP_ID", "0".into()),
                ("SLURM_JOB_NODELIST", "localhost".into()),
                ("SLURM_JOB_ID", "4242".into()),
            ]
            .map(|(k, v)| (k.to_string(), v))
            .to_vec()
        }),
        ("mpich/pmi (mpiexec)", |r| {
            [
                ("PMI_RANK", r.to_string()),
                ("PMI_SIZE", "2".into()),
                ("MPI_LOCALRANKID", r.to_string()),
                ("MPI_LOCALNRANKS", "2".into()),
            ]
            .map(|(k, v)| (k.to_string(), v))
            .to_vec()
        }),
    ];
    for (name, vars) in layouts {
        let port = common::free_port().to_string();
        let children: Vec<_> = (0..2)
            .map(|rank| {
                let mut cmd = Command::new(common::target_exe("c10d-check"));
                cmd.envs(vars(rank)).env("MASTER_PORT", &port).env("TRAINBOOK_DIST_TIMEOUT", "30");
                cmd.stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for (rank, child) in children.into_iter().enumerate() {
            let o = common::wait_with_deadline(child, Duration::from_secs(120), name);
            let stdout = String::from_utf8_lossy(&o.stdout);
            assert!(
                o.status.success()
                    && stdout.contains(&format!("rank {rank}/2 (via {name}, local {rank}")),
                "{name}: {}",
                common::text(&o)
            );
        }
    }
}
