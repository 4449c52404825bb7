//! The set-up without root (issue 14): `scripts/fetch-debs.sh`, the part of `scripts/setup.sh`
//! that gets Gloo's headers where `apt-get install` is not possible, run as an unprivileged
//! user (`nobody`, with a fresh HOME) into a temporary folder. The headers it unpacks must be
//! the ones the c10d shim compiles with: a file including every `<gloo/...>` header that
//! libtorch's c10d headers include, and then `csrc/c10d_shim.cpp` itself (`-fsyntax-only`,
//! against this build's libtorch), must compile with every Gloo header taken from the fetched
//! folder (checked in the compiler's dependency list, so an installed libgloo-dev cannot stand
//! in for a missing one).
//!
//! Prints SKIPPED (and passes) where this cannot be checked: no apt-get/dpkg, no way to become
//! an unprivileged user, or Debian's mirrors unreachable (fetch-debs.sh exits 2 or 3, or takes
//! longer than 3 minutes).
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A folder under /tmp (not `target/` nor `$TMPDIR`, which may sit in a home that `nobody`
/// cannot enter), open to every user, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        let tmp = Path::new("/tmp");
        let base = if tmp.is_dir() { tmp.to_path_buf() } else { std::env::temp_dir() };
        let dir = base.join(format!("trainbook-setup-no-root-{}", std::process::id()));
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

fn open_to_all(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

fn output_of(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The command prefix that runs as an unprivileged user: none when this is not root; as root
/// `setpriv` (util-linux) or `runuser` to `nobody`.
fn unprivileged_prefix() -> Result<Vec<String>, String> {
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
        return Ok(["setpriv", "--reuid=nobody", regid.as_str(), "--clear-groups"]
            .map(String::from)
            .to_vec());
    }
    if have("runuser") {
        return Ok(["runuser", "-u", "nobody", "--"].map(String::from).to_vec());
    }
    Err("neither setpriv nor runuser is available to drop root".into())
}

/// Runs `cmd` with its output in files (no pipe to fill), killed after `limit`. Returns the
/// status (None: killed) and the output.
fn run_logged(
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
fn gloo_headers_libtorch_includes(torch_include: &Path) -> Vec<String> {
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
fn gloo_headers_not_from(deps: &str, fetched: &Path) -> Vec<String> {
    let fetched = fetched.to_string_lossy();
    deps.split_whitespace()
        .filter(|path| path.contains("/gloo/") && path.ends_with(".h"))
        .filter(|path| !path.starts_with(fetched.as_ref()))
        .map(String::from)
        .collect()
}

#[test]
fn an_unprivileged_user_fetches_the_gloo_headers_the_shim_compiles_with() {
    let started = Instant::now();
    let test = "an_unprivileged_user_fetches_the_gloo_headers_the_shim_compiles_with";
    for tool in ["apt-get", "dpkg", "c++"] {
        if !have(tool) {
            println!("SKIPPED {test}: no {tool} on this machine (not Debian/Ubuntu?)");
            return;
        }
    }
    let prefix = match unprivileged_prefix() {
        Ok(prefix) => prefix,
        Err(why) => {
            println!("SKIPPED {test}: running as root and {why}");
            return;
        }
    };

    let scratch = Scratch::new();
    let home = scratch.0.join("home");
    let work = scratch.0.join("work");
    for dir in [&home, &work] {
        fs::create_dir(dir).unwrap();
        open_to_all(dir, 0o777);
    }
    // A copy the unprivileged user can read wherever the checkout is.
    let script = scratch.0.join("fetch-debs.sh");
    fs::copy(Path::new(ROOT).join("scripts/fetch-debs.sh"), &script).unwrap();
    open_to_all(&script, 0o755);
    let dest = work.join("debs");

    let fetch = || {
        let mut cmd = match prefix.split_first() {
            Some((first, rest)) => {
                let mut cmd = Command::new(first);
                cmd.args(rest).arg("bash");
                cmd
            }
            None => Command::new("bash"),
        };
        cmd.arg(&script)
            .arg(&dest)
            .arg("libgloo-dev")
            .current_dir(&work)
            .env_clear()
            .env("HOME", &home)
            .env("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
            .env("LC_ALL", "C");
        // A proxy, where this machine reaches the mirrors through one.
        for var in
            ["http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "no_proxy", "NO_PROXY"]
        {
            if let Some(value) = std::env::var_os(var) {
                cmd.env(var, value);
            }
        }
        cmd
    };
    let (status, log) =
        run_logged(&mut fetch(), &scratch.0, "fetch-debs", Duration::from_secs(180));
    let who =
        if prefix.is_empty() { "this (unprivileged) user".to_string() } else { prefix.join(" ") };
    match status.map(|s| s.code()) {
        Some(Some(0)) => {}
        Some(Some(code @ (2 | 3))) => {
            println!("SKIPPED {test}: fetch-debs.sh as {who} exited {code} (no apt, or Debian's mirrors unreachable):\n{log}");
            return;
        }
        None => {
            println!(
                "SKIPPED {test}: fetch-debs.sh as {who} took over 3 minutes (network?):\n{log}"
            );
            return;
        }
        Some(code) => panic!("fetch-debs.sh as {who} failed ({code:?}):\n{log}"),
    }
    println!("fetch-debs.sh as {who}:\n{log}");

    // The fetched headers: owned by the unprivileged user, nothing else needed.
    let include = dest.join("usr/include");
    assert!(
        include.join("gloo/config.h").is_file(),
        "no gloo/config.h under {}:\n{log}",
        include.display()
    );
    assert!(!dest.join(".apt").exists(), "fetch-debs.sh left its apt folder behind");

    // Run again: nothing to download.
    let (status, again) =
        run_logged(&mut fetch(), &scratch.0, "fetch-debs-again", Duration::from_secs(60));
    assert!(
        status.is_some_and(|s| s.success()) && again.contains("ok: libgloo-dev"),
        "second run:\n{again}"
    );

    // 1. Every Gloo header libtorch's c10d headers include, with the system's c++.
    let lib_dir = Path::new(env!("TRAINBOOK_LIBTORCH_LIB"));
    let torch_root = fs::canonicalize(lib_dir).unwrap().parent().unwrap().to_path_buf();
    let torch_include = torch_root.join("include");
    let headers = gloo_headers_libtorch_includes(&torch_include);
    assert!(headers.contains(&"gloo/config.h".to_string()) && headers.len() > 5, "{headers:?}");
    let probe = scratch.0.join("gloo_probe.cpp");
    let mut source: String = headers.iter().map(|h| format!("#include <{h}>\n")).collect();
    source.push_str("static_assert(GLOO_VERSION > 0);\nint main() { return 0; }\n");
    fs::write(&probe, source).unwrap();
    let deps = scratch.0.join("gloo_probe.d");
    let (status, out) = run_logged(
        Command::new("c++")
            .args(["-std=c++17", "-fsyntax-only", "-MD", "-MF"])
            .arg(&deps)
            .arg("-I")
            .arg(&include)
            .arg(&probe),
        &scratch.0,
        "c++-probe",
        Duration::from_secs(120),
    );
    assert!(status.is_some_and(|s| s.success()), "the Gloo headers do not compile:\n{out}");
    let foreign = gloo_headers_not_from(&fs::read_to_string(&deps).unwrap(), &include);
    assert!(foreign.is_empty(), "Gloo headers not from the fetched folder: {foreign:?}");

    // 2. The shim that includes ProcessGroupGloo.hpp, as build.rs compiles it (syntax only).
    let deps = scratch.0.join("c10d_shim.d");
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
            .arg(&include)
            .arg(Path::new(ROOT).join("csrc/c10d_shim.cpp")),
        &scratch.0,
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
    let foreign = gloo_headers_not_from(&deps, &include);
    assert!(foreign.is_empty(), "the shim took Gloo headers from elsewhere: {foreign:?}");
    println!(
        "{} Gloo headers fetched by {who} compile, the shim with them; {:.0?} in all",
        headers.len(),
        started.elapsed()
    );
}
