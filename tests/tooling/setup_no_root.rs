//! The set-up without root (issues 14 and 29): the parts of `scripts/setup/setup.sh` that get
//! Gloo's headers where `apt-get install` is not possible, run as an unprivileged user (`nobody`,
//! with a fresh HOME) into a temporary folder:
//! - `scripts/setup/fetch-debs.sh` (`apt-get download` + `dpkg -x`), where apt exists;
//! - `scripts/setup/fetch_debs.py` (Python's standard library only: Debian's package pool, checked
//!   against the archive's checksums), with `apt-get` and `dpkg` hidden from `PATH` (a scratch
//!   folder of links to the few programs it may use), as on RHEL/Rocky; it also fetches the
//!   font and nasm, which must run from the fetched folder.
//!
//! The headers either unpacks must be the ones the c10d shim compiles with: a file including
//! every `<gloo/...>` header that libtorch's c10d headers include, and then
//! `csrc/c10d_shim.cpp` itself (`-fsyntax-only`, against this build's libtorch), must compile
//! with every Gloo header taken from the fetched folder (checked in the compiler's dependency
//! list, so an installed libgloo-dev cannot stand in for a missing one).
//!
//! Prints SKIPPED (and passes) where this cannot be checked: no apt-get/dpkg (the first case),
//! no Python the unprivileged user can run (the second), no way to become an unprivileged user,
//! or Debian's mirrors unreachable (the fetcher exits 2 or 3, or takes longer than 3 minutes).
mod no_root;

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use no_root::{
    check_the_shim_compiles_with, have, open_to_all, output_of, python_for, run_logged,
    unprivileged, unprivileged_prefix, which, Scratch, ROOT, SYSTEM_PATH,
};

#[test]
fn an_unprivileged_user_fetches_the_gloo_headers_the_shim_compiles_with() {
    let _turn = common::module_turn(module_path!());
    let started = Instant::now();
    let test = "an_unprivileged_user_fetches_the_gloo_headers_the_shim_compiles_with";
    for tool in ["apt-get", "dpkg", "c++"] {
        if !have(tool) {
            common::skip(test, &format!("no {tool} on this machine (not Debian/Ubuntu?)"));
            return;
        }
    }
    let prefix = match unprivileged_prefix() {
        Ok(prefix) => prefix,
        Err(why) => {
            common::skip(test, &format!("running as root and {why}"));
            return;
        }
    };

    let scratch = Scratch::new("apt");
    let home = scratch.0.join("home");
    let work = scratch.0.join("work");
    for dir in [&home, &work] {
        fs::create_dir(dir).unwrap();
        open_to_all(dir, 0o777);
    }
    // A copy the unprivileged user can read wherever the checkout is.
    let script = scratch.0.join("fetch-debs.sh");
    fs::copy(Path::new(ROOT).join("scripts/setup/fetch-debs.sh"), &script).unwrap();
    open_to_all(&script, 0o755);
    let dest = work.join("debs");

    let fetch = || {
        let mut cmd = unprivileged(&prefix, "bash", &home, SYSTEM_PATH);
        cmd.arg(&script).arg(&dest).arg("libgloo-dev").current_dir(&work);
        cmd
    };
    let (status, log) =
        run_logged(&mut fetch(), &scratch.0, "fetch-debs", Duration::from_secs(180));
    let who =
        if prefix.is_empty() { "this (unprivileged) user".to_string() } else { prefix.join(" ") };
    match status.map(|s| s.code()) {
        Some(Some(0)) => {}
        Some(Some(code @ (2 | 3))) => {
            common::skip(test, &format!("fetch-debs.sh as {who} exited {code} (no apt, or Debian's mirrors unreachable):\n{log}"));
            return;
        }
        None => {
            common::skip(
                test,
                &format!("fetch-debs.sh as {who} took over 3 minutes (network?):\n{log}"),
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

    let count = check_the_shim_compiles_with(&include, &scratch.0);
    println!(
        "{count} Gloo headers fetched by {who} compile, the shim with them; {:.0?} in all",
        started.elapsed()
    );
}

#[test]
fn without_apt_or_dpkg_an_unprivileged_user_fetches_the_gloo_headers_with_python() {
    let _turn = common::module_turn(module_path!());
    let started = Instant::now();
    let test = "without_apt_or_dpkg_an_unprivileged_user_fetches_the_gloo_headers_with_python";
    if !have("c++") {
        common::skip(test, "no c++ on this machine");
        return;
    }
    let prefix = match unprivileged_prefix() {
        Ok(prefix) => prefix,
        Err(why) => {
            common::skip(test, &format!("running as root and {why}"));
            return;
        }
    };

    let scratch = Scratch::new("python");
    let home = scratch.0.join("home");
    let work = scratch.0.join("work");
    let bin = scratch.0.join("bin");
    for dir in [&home, &work, &bin] {
        fs::create_dir(dir).unwrap();
        open_to_all(dir, 0o777);
    }
    let Some(python) = python_for(&prefix, &home) else {
        common::skip(test, "no python3 that the unprivileged user can run");
        return;
    };
    // PATH: links to the programs the fetcher and this test may run, nothing else (no apt-get,
    // no dpkg, no dpkg-deb). gpgv, where present, checks the archive's signature.
    for (name, target) in [
        ("python3", Some(python.clone())),
        ("sh", which("sh").map(PathBuf::from)),
        ("gpgv", which("gpgv").map(PathBuf::from)),
    ] {
        if let Some(target) = target.and_then(|t| fs::canonicalize(t).ok()) {
            std::os::unix::fs::symlink(target, bin.join(name)).unwrap();
        }
    }
    let path = bin.to_string_lossy().to_string();
    let (status, out) = run_logged(
        unprivileged(&prefix, "sh", &home, &path)
            .args(["-c", "command -v apt-get || command -v dpkg || command -v dpkg-deb"]),
        &scratch.0,
        "no-apt",
        Duration::from_secs(10),
    );
    assert!(status.is_some_and(|s| !s.success()), "apt or dpkg is still on PATH={path}: {out}");

    let script = scratch.0.join("fetch_debs.py");
    fs::copy(Path::new(ROOT).join("scripts/setup/fetch_debs.py"), &script).unwrap();
    open_to_all(&script, 0o755);
    let dest = work.join("debs");
    let fetch = || {
        let mut cmd = unprivileged(&prefix, &bin.join("python3").to_string_lossy(), &home, &path);
        cmd.arg(&script)
            .arg(&dest)
            .args(["libgloo-dev", "fonts-dejavu-core", "nasm"])
            .current_dir(&work);
        cmd
    };
    let (status, log) =
        run_logged(&mut fetch(), &scratch.0, "fetch_debs", Duration::from_secs(180));
    let who =
        if prefix.is_empty() { "this (unprivileged) user".to_string() } else { prefix.join(" ") };
    match status.map(|s| s.code()) {
        Some(Some(0)) => {}
        Some(Some(3)) => {
            common::skip(
                test,
                &format!("fetch_debs.py as {who} exited 3 (Debian's mirrors unreachable):\n{log}"),
            );
            return;
        }
        None => {
            common::skip(
                test,
                &format!("fetch_debs.py as {who} took over 3 minutes (network?):\n{log}"),
            );
            return;
        }
        Some(code) => panic!("fetch_debs.py as {who} failed ({code:?}):\n{log}"),
    }
    println!(
        "fetch_debs.py as {who} with PATH={path} ({}):\n{log}",
        fs::read_dir(&bin)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );

    let include = dest.join("usr/include");
    assert!(
        include.join("gloo/config.h").is_file(),
        "no gloo/config.h under {}:\n{log}",
        include.display()
    );
    assert!(
        dest.join("usr/share/fonts/truetype/dejavu/DejaVuSans.ttf").is_file(),
        "no font:\n{log}"
    );
    for pkg in ["libgloo-dev", "fonts-dejavu-core", "nasm"] {
        let stamp = fs::read_to_string(dest.join(".unpacked").join(pkg)).unwrap_or_default();
        assert!(!stamp.trim().is_empty(), "no version stamp for {pkg}:\n{log}");
    }

    // Run again: nothing to download.
    let (status, again) =
        run_logged(&mut fetch(), &scratch.0, "fetch_debs-again", Duration::from_secs(60));
    assert!(
        status.is_some_and(|s| s.success())
            && again.contains("ok: libgloo-dev")
            && !again.contains("fetching"),
        "second run:\n{again}"
    );

    // nasm runs from the fetched folder (setup.sh links it into .venv/bin), where the C library
    // is as new as Debian 12's nasm needs (glibc 2.34).
    let nasm = dest.join("usr/bin/nasm");
    let (status, version) = run_logged(
        unprivileged(&prefix, &nasm.to_string_lossy(), &home, &path).arg("-v"),
        &scratch.0,
        "nasm",
        Duration::from_secs(10),
    );
    let glibc = output_of("getconf", &["GNU_LIBC_VERSION"]).unwrap_or_default();
    let new_enough = glibc
        .strip_prefix("glibc 2.")
        .and_then(|minor| minor.split('.').next()?.parse::<u32>().ok())
        .is_some_and(|minor| minor >= 34);
    if status.is_some_and(|s| s.success()) {
        println!("the fetched nasm runs: {}", version.trim());
    } else {
        assert!(!new_enough, "the fetched nasm does not run with {glibc}:\n{version}");
        println!("the fetched nasm does not run here ({glibc:?} < glibc 2.34): as setup.sh says");
    }

    let count = check_the_shim_compiles_with(&include, &scratch.0);
    println!(
        "{count} Gloo headers fetched by {who} with fetch_debs.py (no apt-get, no dpkg) compile, the shim with them; {:.0?} in all",
        started.elapsed()
    );
}
