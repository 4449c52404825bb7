//! The prebuilt kernel cache (scripts/kernel/kernel_cache.py, scripts/kernel/kernel-slots.sh): a
//! new kernel's build slot is seeded with a copy of the cache's current version, once per version,
//! and a failed copy leaves the slot as it was; two kernels started at once are both seeded and run
//! their first cell without cargo compiling any dependency again; and the caller's cargo profile
//! settings do not reach the kernel's builds.
use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Runs `seed_slot SLOT` from scripts/kernel/kernel-slots.sh with `cache` as
/// TRAINBOOK_KERNEL_CACHE; returns its stderr.
fn seed(slot: &Path, cache: &str) -> String {
    let script = Path::new(ROOT).join("scripts/kernel/kernel-slots.sh");
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("set -euo pipefail; source '{}'; seed_slot \"$1\"", script.display()))
        .arg("seed")
        .arg(slot)
        .env("TRAINBOOK_KERNEL_CACHE", cache)
        .output()
        .unwrap();
    assert!(out.status.success(), "seed_slot failed: {}", common::text(&out));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A cache version holding one compiled file and, unless `lock` is false, a Cargo.lock.
fn version(cache: &Path, name: &str, content: &str, lock: bool) -> PathBuf {
    let dir = cache.join(name);
    std::fs::create_dir_all(dir.join("target/debug/deps")).unwrap();
    std::fs::write(dir.join("target/debug/deps/libtch-1.rlib"), content).unwrap();
    if lock {
        std::fs::write(dir.join("Cargo.lock"), format!("# {name}\n")).unwrap();
    }
    dir
}

fn make_current(cache: &Path, name: &str) {
    let link = cache.join("current");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(name, &link).unwrap();
}

fn leftovers(slot: &Path) -> Vec<String> {
    std::fs::read_dir(slot)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".seeding"))
        .collect()
}

#[test]
fn a_slot_is_seeded_once_per_cache_version_and_a_failed_copy_changes_nothing() {
    let _turn = common::module_turn(module_path!());
    let scratch = common::WorkDir::new("kernel-cache-seed");
    let cache = scratch.join("cache");
    let slot = scratch.join("slot-0");
    std::fs::create_dir_all(&slot).unwrap();
    let compiled = Path::new("target/debug/deps/libtch-1.rlib");

    // No cache yet: nothing happens.
    assert_eq!(seed(&slot, cache.to_str().unwrap()), "");
    assert!(!slot.join("target").exists());

    let v1 = version(&cache, "v-1", "one", true);
    make_current(&cache, "v-1");
    seed(&slot, cache.to_str().unwrap());
    assert_eq!(std::fs::read_to_string(slot.join(compiled)).unwrap(), "one");
    assert_eq!(std::fs::read_to_string(slot.join("Cargo.lock")).unwrap(), "# v-1\n");
    let v1 = std::fs::canonicalize(v1).unwrap();
    assert_eq!(
        std::fs::read_to_string(slot.join(".seeded-from")).unwrap().trim(),
        v1.to_str().unwrap()
    );
    // The copy keeps modification times: cargo's freshness checks compare them.
    let mtime = |p: &Path| std::fs::metadata(p).unwrap().modified().unwrap();
    assert_eq!(mtime(&slot.join(compiled)), mtime(&v1.join(compiled)));

    // The same version again: the slot's own later builds are kept.
    std::fs::write(slot.join("target/debug/deps/libmine.rlib"), "mine").unwrap();
    seed(&slot, cache.to_str().unwrap());
    assert!(slot.join("target/debug/deps/libmine.rlib").exists());

    // A new version replaces the slot's target/.
    version(&cache, "v-2", "two", true);
    make_current(&cache, "v-2");
    seed(&slot, cache.to_str().unwrap());
    assert_eq!(std::fs::read_to_string(slot.join(compiled)).unwrap(), "two");
    assert!(!slot.join("target/debug/deps/libmine.rlib").exists());

    // A version that cannot be copied (no Cargo.lock): a warning naming it; the slot keeps v-2.
    version(&cache, "v-3", "three", false);
    make_current(&cache, "v-3");
    let warning = seed(&slot, cache.to_str().unwrap());
    assert!(
        warning.contains("could not copy the kernel cache") && warning.contains("v-3"),
        "{warning}"
    );
    assert_eq!(std::fs::read_to_string(slot.join(compiled)).unwrap(), "two");
    assert_eq!(std::fs::read_to_string(slot.join("Cargo.lock")).unwrap(), "# v-2\n");
    assert!(leftovers(&slot).is_empty(), "{:?}", leftovers(&slot));

    // An empty TRAINBOOK_KERNEL_CACHE turns seeding off.
    version(&cache, "v-4", "four", true);
    make_current(&cache, "v-4");
    seed(&slot, "");
    assert_eq!(std::fs::read_to_string(slot.join(compiled)).unwrap(), "two");
}

#[test]
fn kernels_started_together_are_seeded_and_compile_no_dependency() {
    let _turn = common::module_turn(module_path!());
    // Brings the cache up to date first (after `make setup`, cargo finds nothing to rebuild).
    let (status, stdout) = common::run_streaming(
        Command::new(common::venv_bin("python"))
            .arg("scripts/kernel/kernel_cache.py")
            .arg("check")
            .current_dir(ROOT),
        Duration::from_secs(2400),
        "kernel cache check",
    );
    assert!(status.success() && stdout.contains("kernel cache check: ok"), "{stdout}");
}

#[test]
fn kernels_drop_the_callers_cargo_profile_settings() {
    let _turn = common::module_turn(module_path!());
    // `make test` sets CARGO_INCREMENTAL=0 on CI: a kernel inheriting it would compile trainbook
    // again (the setting is part of each unit's identity) instead of using the cache.
    let script = Path::new(ROOT).join("scripts/kernel/kernel-slots.sh");
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("source '{}'; same_build_settings; env", script.display()))
        .env("CARGO_INCREMENTAL", "0")
        .env("CARGO_PROFILE_DEV_OPT_LEVEL", "1")
        .env("CARGO_TERM_COLOR", "never")
        .output()
        .unwrap();
    let env = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", common::text(&out));
    assert!(!env.contains("CARGO_INCREMENTAL=") && !env.contains("CARGO_PROFILE_"), "{env}");
    assert!(env.contains("CARGO_TERM_COLOR=never"), "other cargo settings stay: {env}");
}
