//! Pre-emption under a real Slurm (Debian's slurm-wlm 22.05): the test starts a one-node
//! cluster on localhost (munged with a generated key, slurmctld and slurmd with a generated
//! slurm.conf, every file in a temporary folder, free ports) and stops it at the end, also when
//! a check fails. Where the machine cannot host it (not root, one CPU) the test prints SKIPPED
//! with the reason; as root, where `scripts/setup/setup.sh` installs Slurm and munge, a missing
//! program or a daemon that does not start is a failure.
//!
//! Each job is examples/slurm/mnist-cpu.sbatch as written (`--signal=USR1@90 --requeue
//! --open-mode=append`, srun, `--requeue` for the program), submitted with the test's data,
//! output folder and one epoch, and the debug build of the example (`PROGRAM`). Once the run's
//! first step checkpoint exists, the test delivers the notice now with `scancel --signal=USR1
//! JOB`, which signals the job's steps exactly as the `--signal=USR1@90` time-limit notice does
//! (waiting for a real limit would cost a minute or more per job, since Slurm checks limits
//! every 30 s or so). The ranks stop at the next step with a checkpoint, rank 0 runs `scontrol
//! requeue` (which ends the job at once), the job goes back to the queue, where Slurm would hold
//! it for about two minutes (its EligibleTime): the test starts it two seconds later (`scontrol
//! update JobId=.. StartTime=now+2`) once the first run has left the node (idle again). It starts again,
//! resumes and finishes (COMPLETED, one restart); its final weights equal an uninterrupted
//! run's bit for bit. Once with one task, once with two (`srun`, 2 tasks; the reference is the
//! same 2 ranks under torchrun). About 2 minutes in all on 2 cores.
use crate::common;
use crate::slurm_cluster::{read, wait_for, Cluster, NoCluster};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const EPOCH_ARGS: [&str; 4] = ["--epochs", "1", "--save-every-steps", "10"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn step_checkpoints(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("step-"))
                        && p.join("manifest.json").exists()
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

/// Submits examples/slurm/mnist-cpu.sbatch with `tasks` tasks, signals it once its first
/// checkpoint exists, waits for the requeued job to finish; returns its output folder.
fn preempted_job(cluster: &Cluster, work: &Path, data: &Path, tasks: usize) -> PathBuf {
    let out = work.join(format!("slurm-{tasks}"));
    let t0 = Instant::now();
    let at =
        |what: &str| println!("[{tasks} task(s)] {:6.1} s  {what}", t0.elapsed().as_secs_f64());
    let o = cluster
        .cmd("sbatch")
        .arg("--parsable")
        .arg(format!("--ntasks={tasks}"))
        .arg(format!("--chdir={}", repo().display()))
        .arg(format!("--output={}", work.join(format!("job-{tasks}.out")).display()))
        .arg(repo().join("examples/slurm/mnist-cpu.sbatch"))
        .args(EPOCH_ARGS)
        .arg("--data")
        .arg(data)
        .env("PROGRAM", common::target_exe("examples/mnist"))
        .env("OUT", &out)
        .env("MASTER_PORT", common::free_port().to_string())
        .env("TRAINBOOK_DIST_TIMEOUT", "60")
        .env("OMP_NUM_THREADS", "1") // as torchrun sets it for the reference
        .output()
        .unwrap();
    assert!(o.status.success(), "sbatch failed: {}\n{}", common::text(&o), cluster.logs());
    let job = String::from_utf8_lossy(&o.stdout).trim().split(';').next().unwrap().to_string();
    at(&format!("submitted job {job}"));
    let log = work.join(format!("job-{tasks}.out"));
    let ckpts = out.join("checkpoints");
    let started = wait_for(|| !step_checkpoints(&ckpts).is_empty(), Duration::from_secs(300));
    assert!(started.is_ok(), "no checkpoint in 300 s\n{}\n{}", read(&log), cluster.logs());
    let first = step_checkpoints(&ckpts);
    at(&format!("first checkpoint {}", first[0].display()));
    let s = cluster.cmd("scancel").args(["--signal=USR1", &job]).output().unwrap();
    assert!(s.status.success(), "scancel --signal=USR1: {}", common::text(&s));
    at("SIGUSR1 sent to the job's steps (scancel --signal=USR1, as --signal=USR1@90 does)");
    let mut seen_interrupt = false;
    let mut seen_requeue = false;
    let done = wait_for(
        || {
            let text = read(&log);
            if !seen_interrupt && text.contains("interrupted (SIGUSR1") {
                seen_interrupt = true;
                let newest = step_checkpoints(&ckpts).pop();
                at(&format!("stopped with checkpoint {newest:?}"));
            }
            if !seen_requeue && text.contains("requeueing Slurm job") {
                seen_requeue = true;
                at("rank 0 requeues the job");
            }
            let state = cluster.job_field(&job, "JobState");
            if matches!(state.as_deref(), Some("FAILED" | "CANCELLED" | "TIMEOUT" | "NODE_FAIL")) {
                return true;
            }
            // Once the first run has left the node (idle again: starting the job while it is
            // still completing makes Slurm kill it, "Job credential revoked").
            if seen_requeue
                && state.as_deref() == Some("PENDING")
                && cluster.job_field(&job, "Reason").as_deref() == Some("BeginTime")
                && cluster.node_state() == "idle"
            {
                // Slurm holds a requeued job for ~2 minutes (EligibleTime); start it in 2 s.
                // Not "now": slurmd revoked the first run's credential at a whole second, and
                // rejects a new credential created in that same second ("Job credential
                // revoked", seen when the restart came 0.3 s after the requeue).
                let _ = cluster
                    .cmd("scontrol")
                    .args(["update", &format!("JobId={job}"), "StartTime=now+2"])
                    .output();
                at("requeued job pending (BeginTime): scontrol update StartTime=now+2");
            }
            state.as_deref() == Some("COMPLETED")
        },
        Duration::from_secs(900),
    );
    let text = read(&log);
    let state = cluster.job_field(&job, "JobState");
    assert!(
        done.is_ok() && state.as_deref() == Some("COMPLETED"),
        "job {job} did not complete ({state:?})\n{text}\n{}",
        cluster.logs()
    );
    at("job COMPLETED");
    println!("--- job {job}'s log ---\n{text}---");
    assert_eq!(cluster.job_field(&job, "Restarts").as_deref(), Some("1"), "{text}");
    assert!(text.contains("interrupted (SIGUSR1"), "{text}");
    assert!(text.contains("requeueing Slurm job"), "{text}");
    assert!(text.contains("DUE TO JOB REQUEUE"), "{text}");
    assert!(text.contains("resuming from"), "{text}");
    out
}

fn reference(work: &Path, data: &Path, tasks: usize) -> PathBuf {
    let out = work.join(format!("reference-{tasks}"));
    let mut cmd = if tasks == 1 {
        Command::new(common::target_exe("examples/mnist"))
    } else {
        let mut c = Command::new(common::venv_bin("torchrun"));
        c.args(["--standalone", &format!("--nproc-per-node={tasks}"), "--no-python"])
            .arg(common::target_exe("examples/mnist"));
        c
    };
    cmd.args(["--device", "cpu", "--workers", "1"])
        .args(EPOCH_ARGS)
        .arg("--data")
        .arg(data)
        .arg("--out")
        .arg(&out);
    cmd.env("OMP_NUM_THREADS", "1");
    for var in ["SLURM_JOB_ID", "SLURM_PROCID", "SLURM_NTASKS"] {
        cmd.env_remove(var);
    }
    let o = common::run_with_deadline(&mut cmd, Duration::from_secs(900), "reference run");
    assert!(o.status.success(), "{}", common::text(&o));
    out
}

fn assert_same_weights(a: &Path, b: &Path, what: &str) {
    let (a, b) = (
        common::sorted_tensors(&a.join("model.safetensors")),
        common::sorted_tensors(&b.join("model.safetensors")),
    );
    assert!(!a.is_empty());
    let max = common::max_abs_diff(&a, &b);
    println!("{what}: final weights vs uninterrupted, max |diff| {max:e}");
    assert_eq!(max, 0.0, "{what}: not bitwise equal");
}

#[test]
fn slurm_preemption_requeues_and_resumes_exactly() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("slurm");
    let cluster = match Cluster::start(&work.join("cluster")) {
        Ok(c) => c,
        Err(NoCluster::CannotHost(why)) => {
            common::skip(
                "slurm_preemption_requeues_and_resumes_exactly",
                &format!("this machine cannot host a Slurm cluster on localhost: {why}"),
            );
            return;
        }
        Err(NoCluster::Failed(why)) => {
            panic!("the Slurm cluster on localhost did not start: {why}")
        }
    };
    let t = Instant::now();
    let data = work.join("mnist");
    common::offline_mnist(&data);
    for tasks in [1, 2] {
        let whole = reference(&work, &data, tasks);
        let cut = preempted_job(&cluster, &work, &data, tasks);
        assert_same_weights(&whole, &cut, &format!("{tasks} task(s)"));
    }
    println!("Slurm test: {:.0} s", t.elapsed().as_secs_f64());
}
