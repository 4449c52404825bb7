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

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

const EPOCH_ARGS: [&str; 4] = ["--epochs", "1", "--save-every-steps", "10"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/usr/bin".into(), "/sbin".into()])
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// A one-node Slurm on localhost; dropping it stops the daemons.
struct Cluster {
    dir: PathBuf,
    conf: PathBuf,
    daemons: Vec<(&'static str, Child)>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Jobs left by a failed check end first (slurmstepd would outlive slurmd).
        if self.daemons.len() == 3 {
            let _ = self.cmd("scancel").args(["--user=root", "--full"]).output();
            let _ = wait_for(
                || {
                    self.cmd("squeue")
                        .args(["-h", "-o", "%i"])
                        .output()
                        .map_or(true, |o| o.stdout.is_empty())
                },
                Duration::from_secs(40),
            );
        }
        for (_, child) in self.daemons.iter_mut().rev() {
            // SAFETY: SIGTERM to a daemon this test started.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(10) {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Why there is no cluster: a machine that cannot host one (a skip), or one that should have
/// and failed to start it (a failure: the set-up installs Slurm wherever it runs as root).
enum NoCluster {
    CannotHost(String),
    Failed(String),
}

impl From<String> for NoCluster {
    fn from(why: String) -> Self {
        NoCluster::Failed(why)
    }
}

impl Cluster {
    /// Starts the cluster in `dir`, or says why it cannot.
    fn start(dir: &Path) -> Result<Cluster, NoCluster> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            let why = "not root (slurmd must start tasks as the submitting user)";
            return Err(NoCluster::CannotHost(why.into()));
        }
        let mut bin = std::collections::HashMap::new();
        for name in ["munged", "slurmctld", "slurmd", "sbatch", "scontrol", "scancel", "squeue"] {
            let path = find_program(name).ok_or_else(|| {
                format!(
                    "{name} not found: as root, `make setup` (scripts/setup/setup.sh) installs \
                     slurmctld, slurmd, slurm-client and munge"
                )
            })?;
            bin.insert(name, path);
        }
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        if cpus < 2 {
            return Err(NoCluster::CannotHost(format!("{cpus} CPU: the 2-task job needs 2")));
        }
        let mem_mb = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find(|l| l.starts_with("MemTotal:"))
                    .and_then(|l| l.split_whitespace().nth(1).and_then(|kb| kb.parse::<u64>().ok()))
            })
            .map_or(1024, |kb| kb / 1024 * 9 / 10);
        for sub in ["state", "spool", "munge"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        let mut cluster =
            Cluster { dir: dir.to_path_buf(), conf: dir.join("slurm.conf"), daemons: Vec::new() };
        // munged: a generated key, its socket in the temporary folder.
        let munge = dir.join("munge");
        let key: Vec<u8> = (0..1024).map(|_| rand_byte()).collect();
        std::fs::write(munge.join("munge.key"), key).unwrap();
        set_mode(&munge.join("munge.key"), 0o600);
        set_mode(&munge, 0o700);
        let socket = munge.join("munge.sock");
        let m = Command::new(&bin["munged"])
            .arg("--foreground")
            .arg("--force")
            .arg(format!("--key-file={}", munge.join("munge.key").display()))
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--pid-file={}", munge.join("munged.pid").display()))
            .arg(format!("--log-file={}", munge.join("munged.log").display()))
            .arg(format!("--seed-file={}", munge.join("munged.seed").display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("munged: {e}"))?;
        cluster.daemons.push(("munged", m));
        wait_for(|| socket.exists(), Duration::from_secs(10))
            .map_err(|_| format!("munged did not start: {}", read(&munge.join("munged.log"))))?;

        let host = hostname();
        let (ctld_port, slurmd_port) = (common::free_port(), common::free_port());
        let d = dir.display();
        let conf = format!(
            "ClusterName=trainbook\n\
             SlurmctldHost={host}(127.0.0.1)\n\
             SlurmctldPort={ctld_port}\n\
             SlurmdPort={slurmd_port}\n\
             SlurmUser=root\n\
             SlurmdUser=root\n\
             AuthType=auth/munge\n\
             CredType=cred/munge\n\
             AuthInfo=socket={sock}\n\
             StateSaveLocation={d}/state\n\
             SlurmdSpoolDir={d}/spool\n\
             SlurmctldPidFile={d}/slurmctld.pid\n\
             SlurmdPidFile={d}/slurmd.pid\n\
             SlurmctldLogFile={d}/slurmctld.log\n\
             SlurmdLogFile={d}/slurmd.log\n\
             ProctrackType=proctrack/linuxproc\n\
             TaskPlugin=task/none\n\
             SwitchType=switch/none\n\
             MpiDefault=none\n\
             SchedulerType=sched/builtin\n\
             SelectType=select/cons_tres\n\
             SelectTypeParameters=CR_CPU\n\
             JobRequeue=1\n\
             ReturnToService=2\n\
             MinJobAge=600\n\
             KillWait=30\n\
             InactiveLimit=0\n\
             AccountingStorageType=accounting_storage/none\n\
             JobAcctGatherType=jobacct_gather/none\n\
             JobCompType=jobcomp/none\n\
             NodeName=localhost NodeAddr=127.0.0.1 CPUs=2 RealMemory={mem_mb} State=UNKNOWN\n\
             PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP\n",
            sock = socket.display()
        );
        std::fs::write(&cluster.conf, conf).unwrap();
        for (name, args) in
            [("slurmctld", vec!["-D", "-c", "-i"]), ("slurmd", vec!["-D", "-N", "localhost"])]
        {
            let child = Command::new(&bin[name])
                .args(&args)
                .arg("-f")
                .arg(&cluster.conf)
                .env("SLURM_CONF", &cluster.conf)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("{name}: {e}"))?;
            cluster.daemons.push((name, child));
        }
        let ready = wait_for(|| cluster.node_state() == "idle", Duration::from_secs(60));
        if ready.is_err() {
            return Err(NoCluster::Failed(format!(
                "the node did not become idle in 60 s\nslurmctld.log:\n{}\nslurmd.log:\n{}",
                read(&dir.join("slurmctld.log")),
                read(&dir.join("slurmd.log"))
            )));
        }
        Ok(cluster)
    }

    /// A Slurm client command against this cluster.
    fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new(find_program(program).unwrap_or_else(|| program.into()));
        c.env("SLURM_CONF", &self.conf);
        c
    }

    /// The node's state as sinfo says it (`idle`, `allocated`, `completing`, ...).
    fn node_state(&self) -> String {
        self.cmd("sinfo")
            .args(["-h", "-N", "-o", "%T"])
            .output()
            .map_or(String::new(), |o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    }

    /// `scontrol show job ID`'s `Key=Value` field.
    fn job_field(&self, job: &str, key: &str) -> Option<String> {
        let o = self.cmd("scontrol").args(["show", "job", job]).output().ok()?;
        let text = String::from_utf8_lossy(&o.stdout).to_string();
        text.split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{key}=")).map(str::to_string))
    }

    fn logs(&self) -> String {
        format!(
            "slurmctld.log (tail):\n{}\nslurmd.log (tail):\n{}",
            tail(&read(&self.dir.join("slurmctld.log")), 40),
            tail(&read(&self.dir.join("slurmd.log")), 40)
        )
    }
}

fn rand_byte() -> u8 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_nanos());
    h.finish() as u8
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf is writable for its length.
    unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).split('.').next().unwrap_or("localhost").to_string()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn wait_for(mut ok: impl FnMut() -> bool, limit: Duration) -> Result<(), ()> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    Err(())
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
