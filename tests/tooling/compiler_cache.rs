//! The build scripts' C++ compiler (scripts/setup/c++-via-sccache, which .cargo/config.toml names
//! as CXX and the notebook kernels use too): with sccache in the venv, a second compile of the same
//! source with the same flags is answered from the cache, and the object file is the one the
//! compiler itself writes; with `TRAINBOOK_SCCACHE=0` (or no sccache) it is plain `c++`. Each check
//! uses a private cache directory and server socket, never the user's.
use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

const SOURCE: &str = "#include <numeric>\n#include <vector>\n\
                      int total(int n) { std::vector<int> v(n); std::iota(v.begin(), v.end(), 0); \
                      return std::accumulate(v.begin(), v.end(), 0); }\n";

fn wrapper() -> PathBuf {
    Path::new(ROOT).join("scripts/setup/c++-via-sccache")
}

/// A compile of `dir/shim.cpp` into `dir/OUT` through the wrapper, with a cache and socket of
/// the test's own.
fn compile(dir: &Path, out: &str, extra_env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new(wrapper());
    cmd.args(["-O2", "-std=c++20", "-fPIC", "-c", "shim.cpp", "-o", out])
        .current_dir(dir)
        .env("SCCACHE_DIR", dir.join("cache"))
        .env("SCCACHE_SERVER_UDS", dir.join("server.sock"))
        .env_remove("TRAINBOOK_SCCACHE");
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    cmd.output().expect("the wrapper starts")
}

/// sccache's statistics from the test's own server, as JSON.
fn stats(dir: &Path) -> serde_json::Value {
    let out = Command::new(common::venv_bin("sccache"))
        .args(["--show-stats", "--stats-format", "json"])
        .env("SCCACHE_DIR", dir.join("cache"))
        .env("SCCACHE_SERVER_UDS", dir.join("server.sock"))
        .output()
        .expect("sccache --show-stats");
    assert!(out.status.success(), "{}", common::text(&out));
    serde_json::from_slice(&out.stdout).expect("sccache's JSON statistics")
}

fn stop_server(dir: &Path) {
    let _ = Command::new(common::venv_bin("sccache"))
        .arg("--stop-server")
        .env("SCCACHE_SERVER_UDS", dir.join("server.sock"))
        .output();
}

/// The cache hits of C++ compiles in sccache's statistics.
fn cpp_hits(stats: &serde_json::Value) -> u64 {
    stats["stats"]["cache_hits"]["counts"]["C/C++"].as_u64().unwrap_or(0)
}

#[test]
fn a_second_compile_is_a_cache_hit_with_the_compilers_own_object() {
    let _turn = common::module_turn(module_path!());
    // The set-up installs sccache (scripts/setup/requirements.txt): without it the set-up failed.
    assert!(
        common::venv_bin("sccache").exists(),
        "no sccache in the venv: `make setup` installs it (scripts/setup/requirements.txt)"
    );
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    std::fs::write(dir.join("shim.cpp"), SOURCE).unwrap();
    let first = compile(dir, "first.o", &[]);
    assert!(first.status.success(), "{}", common::text(&first));
    let hits_before = cpp_hits(&stats(dir));
    let second = compile(dir, "second.o", &[]);
    assert!(second.status.success(), "{}", common::text(&second));
    let after = stats(dir);
    stop_server(dir);
    assert_eq!(cpp_hits(&after), hits_before + 1, "the second compile is a hit: {after}");
    // The compiler itself, same flags: the cached object is byte for byte what it writes.
    let direct = Command::new("c++")
        .args(["-O2", "-std=c++20", "-fPIC", "-c", "shim.cpp", "-o", "direct.o"])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(direct.status.success(), "{}", common::text(&direct));
    let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
    assert_eq!(read("second.o"), read("direct.o"), "the cached object differs from c++'s");
    assert_eq!(read("first.o"), read("direct.o"));
}

#[test]
fn trainbook_sccache_0_runs_the_compiler_alone() {
    let _turn = common::module_turn(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    std::fs::write(dir.join("shim.cpp"), SOURCE).unwrap();
    let out = compile(dir, "plain.o", &[("TRAINBOOK_SCCACHE", "0")]);
    assert!(out.status.success(), "{}", common::text(&out));
    assert!(dir.join("plain.o").is_file());
    assert!(!dir.join("cache").exists(), "sccache ran: its cache directory was made");
    assert!(!dir.join("server.sock").exists(), "sccache ran: its server socket exists");
    // A compile error is the compiler's, with its status, through the cache as without it.
    std::fs::write(dir.join("shim.cpp"), "int broken( {\n").unwrap();
    for env in [&[("TRAINBOOK_SCCACHE", "0")][..], &[]] {
        let out = compile(dir, "broken.o", env);
        assert!(!out.status.success(), "a broken source compiled ({env:?})");
        assert!(String::from_utf8_lossy(&out.stderr).contains("error"), "{}", common::text(&out));
    }
    stop_server(dir);
}

#[test]
fn the_checkout_and_the_kernels_name_the_same_wrapper() {
    let _turn = common::module_turn(module_path!());
    // cargo reruns a build script whose CXX changed: the checkout's builds (.cargo/config.toml)
    // and the notebook kernels (scripts/kernel/kernel-slots.sh) must name the same file.
    let config = std::fs::read_to_string(Path::new(ROOT).join(".cargo/config.toml")).unwrap();
    assert!(
        config.contains(r#"CXX = { value = "scripts/setup/c++-via-sccache", relative = true }"#),
        ".cargo/config.toml's CXX"
    );
    assert_eq!(std::env::var_os("CXX").map(PathBuf::from), Some(wrapper()), "the tests' CXX");
    let script = Path::new(ROOT).join("scripts/kernel/kernel-slots.sh");
    let env_of = |cxx: Option<&str>| {
        let mut cmd = Command::new("bash");
        cmd.arg("-c").arg(format!(
            "source '{}'; same_build_settings; echo \"CXX=$CXX\"; echo \"REAL=${{TRAINBOOK_CXX:-}}\"",
            script.display()
        ));
        cmd.env_remove("TRAINBOOK_CXX");
        match cxx {
            Some(c) => cmd.env("CXX", c),
            None => cmd.env_remove("CXX"),
        };
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", common::text(&out));
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let want = format!("CXX={}\n", wrapper().display());
    assert_eq!(env_of(None), format!("{want}REAL=\n"));
    // A compiler module's CXX becomes the compiler the wrapper runs.
    assert_eq!(env_of(Some("g++-14")), format!("{want}REAL=g++-14\n"));
    // Started from a checkout build (CXX already the wrapper): unchanged, no loop.
    assert_eq!(env_of(Some(wrapper().to_str().unwrap())), format!("{want}REAL=\n"));
}
