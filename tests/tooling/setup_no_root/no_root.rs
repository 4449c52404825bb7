//! Helpers of tests/tooling/setup_no_root.rs: scratch folders open to every user, becoming an
//! unprivileged user, running a command with a deadline, and compiling the c10d shim against
//! fetched Gloo headers.
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The checkout (scripts/, csrc/).
pub const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A folder under /tmp (not `target/` nor `$TMPDIR`, which may sit in a home that `nobody`
/// cannot enter), open to every user, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        let tmp = Path::new("/tmp");
        let base = if tmp.is_dir() { tmp.to_path_buf() } else { std::env::temp_dir() };
        let dir = base.join(format!("trainbook-setup-no-root-{}-{tag}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let scratch = Scratch(dir);
        open_to_all(&scratch.0, 0o755);
        scratch
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::env::var_os("TRAINBOOK_KEEP_TEST_DIRS").is_none() {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
}

/// Sets `path`'s permission bits.
pub fn open_to_all(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// Whether `tool` is on this process's PATH.
pub fn have(tool: &str) -> bool {
    which(tool).is_some()
}

/// The path of `tool` on this process's PATH.
pub fn which(tool: &str) -> Option<String> {
    output_of("sh", &["-c", &format!("command -v {tool}")]).filter(|path| path.starts_with('/'))
}

/// The trimmed stdout of `cmd args`, if it runs and succeeds.
pub fn output_of(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The command prefix that runs as an unprivileged user: none when this is not root; as root
/// `setpriv` (util-linux) or `runuser` to `nobody`.
pub fn unprivileged_prefix() -> Result<Vec<String>, String> {
    if output_of("id", &["-u"]).as_deref() != Some("0") {
        return Ok(vec![]);
    }
    if output_of("id", &["-u", "nobody"]).is_none() {
        return Err("no user `nobody` to run as".into());
    }
    let group = ["nogroup", "nobody"]
        .into_iter()
        .find(|g| output_of("getent", &["group", g]).is_some())
        .ok_or("no group nogroup/nobody")?;
    if have("setpriv") {
        let regid = format!("--regid={group}");
        let setpriv = which("setpriv").unwrap();
        return Ok([setpriv.as_str(), "--reuid=nobody", regid.as_str(), "--clear-groups"]
            .map(String::from)
            .to_vec());
    }
    if let Some(runuser) = which("runuser") {
        return Ok([runuser.as_str(), "-u", "nobody", "--"].map(String::from).to_vec());
    }
    Err("neither setpriv nor runuser is available to drop root".into())
}

/// Runs `cmd` with its output in files (no pipe to fill), killed after `limit`. Returns the
/// status (None: killed) and the output.
pub fn run_logged(
    cmd: &mut Command,
    dir: &Path,
    name: &str,
    limit: Duration,
) -> (Option<ExitStatus>, String) {
    let log = dir.join(format!("{name}.log"));
    let file = fs::File::create(&log).unwrap();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    (status, fs::read_to_string(&log).unwrap_or_default())
}

/// Every header named by `#include <gloo/...>` in libtorch's c10d headers.
pub fn gloo_headers_libtorch_includes(torch_include: &Path) -> Vec<String> {
    let c10d = torch_include.join("torch/csrc/distributed/c10d");
    let mut headers = Vec::new();
    for entry in fs::read_dir(&c10d).unwrap().flatten() {
        let Ok(text) = fs::read_to_string(entry.path()) else { continue };
        for line in text.lines() {
            if let Some(rest) = line.trim().strip_prefix("#include <gloo/") {
                let header = format!("gloo/{}", rest.trim_end_matches('>'));
                if !headers.contains(&header) {
                    headers.push(header);
                }
            }
        }
    }
    headers.sort();
    headers
}

/// The Gloo headers in a `-MD` dependency file that do not come from `fetched`.
pub fn gloo_headers_not_from(deps: &str, fetched: &Path) -> Vec<String> {
    let fetched = fetched.to_string_lossy();
    deps.split_whitespace()
        .filter(|path| path.contains("/gloo/") && path.ends_with(".h"))
        .filter(|path| !path.starts_with(fetched.as_ref()))
        .map(String::from)
        .collect()
}

/// A command running `program` as the unprivileged user (`prefix`), with a clean environment:
/// HOME, PATH, LC_ALL=C and the proxy variables, where this machine reaches the mirrors
/// through one.
pub fn unprivileged(prefix: &[String], program: &str, home: &Path, path: &str) -> Command {
    let mut cmd = match prefix.split_first() {
        Some((first, rest)) => {
            let mut cmd = Command::new(first);
            cmd.args(rest).arg(program);
            cmd
        }
        None => Command::new(program),
    };
    cmd.env_clear().env("HOME", home).env("PATH", path).env("LC_ALL", "C");
    for var in ["http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "no_proxy", "NO_PROXY"] {
        if let Some(value) = std::env::var_os(var) {
            cmd.env(var, value);
        }
    }
    cmd
}

/// The PATH of the fetch-debs.sh case: the system's usual folders.
pub const SYSTEM_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Compiles, with the system's c++ and the Gloo headers in `include`: 1. every Gloo header
/// libtorch's c10d headers include; 2. the shim that includes ProcessGroupGloo.hpp, as build.rs
/// compiles it (syntax only). Checks that every Gloo header came from `include`. Returns the
/// number of headers of 1.
pub fn check_the_shim_compiles_with(include: &Path, scratch: &Path) -> usize {
    // 1. Every Gloo header libtorch's c10d headers include, with the system's c++.
    let lib_dir = Path::new(env!("TRAINBOOK_LIBTORCH_LIB"));
    let torch_root = fs::canonicalize(lib_dir).unwrap().parent().unwrap().to_path_buf();
    let torch_include = torch_root.join("include");
    let headers = gloo_headers_libtorch_includes(&torch_include);
    assert!(headers.contains(&"gloo/config.h".to_string()) && headers.len() > 5, "{headers:?}");
    let probe = scratch.join("gloo_probe.cpp");
    let mut source: String = headers.iter().map(|h| format!("#include <{h}>\n")).collect();
    source.push_str("static_assert(GLOO_VERSION > 0);\nint main() { return 0; }\n");
    fs::write(&probe, source).unwrap();
    let deps = scratch.join("gloo_probe.d");
    let (status, out) = run_logged(
        Command::new("c++")
            .args(["-std=c++17", "-fsyntax-only", "-MD", "-MF"])
            .arg(&deps)
            .arg("-I")
            .arg(include)
            .arg(&probe),
        scratch,
        "c++-probe",
        Duration::from_secs(120),
    );
    assert!(status.is_some_and(|s| s.success()), "the Gloo headers do not compile:\n{out}");
    let foreign = gloo_headers_not_from(&fs::read_to_string(&deps).unwrap(), include);
    assert!(foreign.is_empty(), "Gloo headers not from the fetched folder: {foreign:?}");

    // 2. The shim that includes ProcessGroupGloo.hpp, as build.rs compiles it (syntax only).
    let deps = scratch.join("c10d_shim.d");
    let (status, out) = run_logged(
        Command::new("c++")
            .args(["-std=c++20", "-fsyntax-only", "-MD", "-MF"])
            .arg(&deps)
            .args(["-DUSE_C10D_GLOO", "-D_GLIBCXX_USE_CXX11_ABI=1", "-DGLOG_USE_GLOG_EXPORT"])
            .arg("-I")
            .arg(&torch_include)
            .arg("-I")
            .arg(torch_include.join("torch/csrc/api/include"))
            .arg("-I")
            .arg(include)
            .arg(Path::new(ROOT).join("csrc/c10d_shim.cpp")),
        scratch,
        "c++-shim",
        Duration::from_secs(240),
    );
    assert!(
        status.is_some_and(|s| s.success()),
        "csrc/c10d_shim.cpp does not compile with the fetched headers:\n{out}"
    );
    let deps = fs::read_to_string(&deps).unwrap();
    assert!(
        deps.contains("ProcessGroupGloo.hpp"),
        "the shim no longer includes ProcessGroupGloo.hpp?"
    );
    let foreign = gloo_headers_not_from(&deps, include);
    assert!(foreign.is_empty(), "the shim took Gloo headers from elsewhere: {foreign:?}");
    headers.len()
}

/// The Python the unprivileged user can run, with the modules the fetcher needs: `python3` on
/// PATH (the interpreter behind a venv or a shim), else the system's.
pub fn python_for(prefix: &[String], home: &Path) -> Option<PathBuf> {
    let on_path = output_of("python3", &["-c", "import sys; print(sys.executable)"]);
    let candidates =
        on_path.into_iter().chain(["/usr/bin/python3", "/usr/local/bin/python3"].map(String::from));
    candidates.filter_map(|c| fs::canonicalize(c).ok()).find(|python| {
        let mut cmd = unprivileged(prefix, &python.to_string_lossy(), home, SYSTEM_PATH);
        cmd.args(["-c", "import hashlib, lzma, tarfile, urllib.request"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}
