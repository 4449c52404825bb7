# Sourced by scripts/kernel/trainbook-kernel and scripts/kernel/trainbook-repl: evcxr's build slots
# and the prebuilt kernel cache (scripts/kernel/kernel_cache.py) they are seeded from.
#
# slot_root: where the build slots live (TRAINBOOK_KERNEL_SLOTS, else EVCXR_TMPDIR, else
# ~/.cache/trainbook/evcxr). kernel_cache_dir: the prebuilt cache (TRAINBOOK_KERNEL_CACHE, else
# ~/.cache/trainbook/kernel-cache; set but empty: none).
slot_root() {
  printf '%s\n' "${TRAINBOOK_KERNEL_SLOTS:-${EVCXR_TMPDIR:-${XDG_CACHE_HOME:-$HOME/.cache}/trainbook/evcxr}}"
}
kernel_cache_dir() {
  printf '%s\n' "${TRAINBOOK_KERNEL_CACHE-${XDG_CACHE_HOME:-$HOME/.cache}/trainbook/kernel-cache}"
}

# same_build_settings: drops the caller's cargo settings that change how evcxr's profile
# compiles (CARGO_INCREMENTAL, which `make test` sets on CI, CARGO_PROFILE_*, and the variables
# cargo sets for a process it runs): they are part of each compiled unit's identity, so a
# kernel started with them would compile trainbook again instead of using the cache, which is
# built without them.
#
# It also sets CXX to the checkout's compiler-cache wrapper, as .cargo/config.toml does for builds
# in the checkout: cc reruns a build script when CXX changes, so the cache and every kernel must
# agree. A CXX of the caller's own (a cluster's compiler module) becomes the compiler the wrapper
# runs (TRAINBOOK_CXX).
same_build_settings() {
  local name wrapper
  unset CARGO_INCREMENTAL
  wrapper=$(cd "$(dirname "${BASH_SOURCE[0]}")/../setup" && pwd)/c++-via-sccache
  if [ -n "${CXX:-}" ] && [ "$CXX" != "$wrapper" ]; then
    export TRAINBOOK_CXX=${TRAINBOOK_CXX:-$CXX}
  fi
  export CXX=$wrapper
  for name in $(compgen -e | grep '^CARGO_PROFILE_' || true); do
    unset "$name"
  done
  # What cargo (and nextest) set for a process they run: a kernel started from `cargo run`, a
  # test or a build script has them, the cache was built without them. A build script that
  # reads one (ring's reads CARGO_MANIFEST_DIR and OUT_DIR) would run again and ring, rustls,
  # ureq and trainbook be compiled again in the slot (measured: three notebook tests started
  # together each compiled trainbook for minutes). The same list, for the tests' nested builds:
  # `without_cargo_run_env` in tests/common/mod.rs.
  for name in $(compgen -e | grep -E '^(CARGO|CARGO_(MANIFEST_[A-Z]+|CRATE_NAME|BIN_NAME|PRIMARY_PACKAGE|TARGET_TMPDIR|RUSTC_CURRENT_DIR|PKG_[A-Z_]+|BIN_EXE_.+|CFG_.+)|OUT_DIR)$' || true); do
    unset "$name"
  done
}

# seed_slot SLOT: copies the kernel cache's current version (its target/ and Cargo.lock) into
# SLOT unless SLOT already holds that version, so the slot's first `:dep trainbook` finds tch and
# trainbook compiled. Takes no lock (the version is never written after it is published), so
# kernels starting together do not wait for each other. A failed copy only costs a cold build:
# it warns, leaves SLOT as it was and returns 0.
seed_slot() {
  local slot=$1 cache version
  cache=$(kernel_cache_dir)
  [ -n "$cache" ] && [ -e "$cache/current" ] || return 0
  version=$(readlink -f "$cache/current") || return 0
  [ "$(cat "$slot/.seeded-from" 2>/dev/null)" = "$version" ] && return 0
  rm -rf "$slot/target.seeding" "$slot/Cargo.lock.seeding"
  if cp -a --reflink=auto "$version/target" "$slot/target.seeding" 2>/dev/null &&
    cp -a "$version/Cargo.lock" "$slot/Cargo.lock.seeding" 2>/dev/null; then
    rm -rf "$slot/target"
    mv "$slot/target.seeding" "$slot/target"
    mv "$slot/Cargo.lock.seeding" "$slot/Cargo.lock"
    printf '%s\n' "$version" >"$slot/.seeded-from"
  else
    echo "trainbook: could not copy the kernel cache $version into $slot; compiling from scratch" >&2
    rm -rf "$slot/target.seeding" "$slot/Cargo.lock.seeding"
  fi
  return 0
}
