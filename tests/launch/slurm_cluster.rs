//! A one-node Slurm cluster on localhost for `slurm.rs`'s pre-emption test: munged with a
//! generated key, slurmctld and slurmd with a generated slurm.conf, every file in a temporary
//! folder, free ports; dropping the [`Cluster`] cancels what is left and stops the daemons. As
//! root the set-up installs Slurm, so there a missing program or a daemon that does not start is
//! [`NoCluster::Failed`]; without root or with one CPU it is [`NoCluster::CannotHost`].
use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

pub(crate) fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/usr/bin".into(), "/sbin".into()])
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// A one-node Slurm on localhost; dropping it stops the daemons.
pub(crate) struct Cluster {
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
pub(crate) enum NoCluster {
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
    pub(crate) fn start(dir: &Path) -> Result<Cluster, NoCluster> {
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
    pub(crate) fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new(find_program(program).unwrap_or_else(|| program.into()));
        c.env("SLURM_CONF", &self.conf);
        c
    }

    /// The node's state as sinfo says it (`idle`, `allocated`, `completing`, ...).
    pub(crate) fn node_state(&self) -> String {
        self.cmd("sinfo")
            .args(["-h", "-N", "-o", "%T"])
            .output()
            .map_or(String::new(), |o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    }

    /// `scontrol show job ID`'s `Key=Value` field.
    pub(crate) fn job_field(&self, job: &str, key: &str) -> Option<String> {
        let o = self.cmd("scontrol").args(["show", "job", job]).output().ok()?;
        let text = String::from_utf8_lossy(&o.stdout).to_string();
        text.split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{key}=")).map(str::to_string))
    }

    pub(crate) fn logs(&self) -> String {
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

pub(crate) fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

pub(crate) fn wait_for(mut ok: impl FnMut() -> bool, limit: Duration) -> Result<(), ()> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    Err(())
}
