#!/usr/bin/env bash
# scripts/setup/fetch-debs.sh DEST PKG...: downloads Debian packages with `apt-get download` and
# unpacks them under DEST with `dpkg -x` (DEST/usr/include/..., DEST/usr/share/...), as any
# user: nothing is installed system-wide and no root is needed. scripts/setup/setup.sh uses it, with
# DEST=.venv/debs, where `apt-get install` is not possible (not root, no passwordless sudo);
# build.rs finds Gloo's headers in .venv/debs/usr/include. It is self-contained, so that
# tests/tooling/setup_no_root.rs can run a copy of it as an unprivileged user.
#
# The packages are unpacked as they are (no dependencies): the ones setup.sh asks for are
# header-only or data (libgloo-dev, fonts-dejavu-core).
#
# Package lists: the system's (/var/lib/apt/lists, readable by every user) first; where they
# are missing or out of date, its own, fetched with `apt-get update` into DEST/.apt (which works
# without root when apt is pointed at user-writable directories) and removed afterwards.
#
# Exit status: 0 every package is unpacked; 2 apt-get or dpkg is missing; 3 a package could not
# be downloaded (no network, no mirror, no such package); 1 anything else.
set -euo pipefail

say() { printf '[setup] %s\n' "$*"; }
die() { printf "[setup] error: %s\n" "$1" >&2; exit "${2:-1}"; }

[ $# -ge 2 ] || die "usage: $0 DEST PKG..."
DEST=$1
shift
for tool in apt-get dpkg; do
  command -v "$tool" >/dev/null 2>&1 ||
    die "$tool not found: this is not a Debian/Ubuntu system; install the packages by other means: $*" 2
done
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
STAMPS="$DEST/.unpacked"
mkdir -p "$STAMPS"

wanted=()
for pkg in "$@"; do
  if [ -s "$STAMPS/$pkg" ]; then
    say "ok: $pkg ($(cat "$STAMPS/$pkg"), unpacked in $DEST)"
  else
    wanted+=("$pkg")
  fi
done
[ ${#wanted[@]} -gt 0 ] || exit 0

APT_DIR="$DEST/.apt"
DOWNLOADS="$APT_DIR/downloads"
rm -rf "$DOWNLOADS"
mkdir -p "$DOWNLOADS"
cleanup() { rm -rf "$APT_DIR"; }
trap cleanup EXIT

# A private apt configuration: lists and cache under DEST/.apt, none of the system's hooks
# (they clean /var/cache/apt, which this user may not write), no AppStream metadata.
private_apt_conf() {
  mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial"
  cat >"$APT_DIR/apt.conf" <<EOF
Dir::State::Lists "$APT_DIR/lists";
Dir::Cache "$APT_DIR/cache";
#clear APT::Update::Post-Invoke;
#clear APT::Update::Post-Invoke-Success;
#clear Acquire::IndexTargets::deb::DEP-11;
#clear Acquire::IndexTargets::deb::DEP-11-icons;
#clear Acquire::IndexTargets::deb::DEP-11-icons-small;
#clear Acquire::IndexTargets::deb::DEP-11-icons-hidpi;
EOF
}

# As root, apt hands downloads to the `_apt` user, who may not be able to write DEST: keep them
# with root then. (Any other user downloads as itself.)
sandbox=()
[ "$(id -u)" != 0 ] || sandbox=(-o APT::Sandbox::User=root)

# apt-get download writes to the current directory.
download() {
  (cd "$DOWNLOADS" && apt-get -q "${sandbox[@]}" "$@" download "${wanted[@]}")
}

log="$APT_DIR/apt.log"
say "downloading ${wanted[*]} with apt-get download (no root needed) into $DEST"
if ! download >"$log" 2>&1; then
  say "apt-get download with the system's package lists failed ($(grep -m1 -E '^(E|W):' "$log" || echo 'no message')); trying again with fresh package lists in $APT_DIR"
  private_apt_conf
  # apt-get update exits 0 when some index files could not be fetched: look at its messages.
  if ! apt-get -q "${sandbox[@]}" -c "$APT_DIR/apt.conf" update >"$log" 2>&1 ||
    grep -q -E '^(E:|W: Failed to fetch|W: Some index files failed)' "$log"; then
    grep -E '^(E|W):' "$log" | sed 's/^/  /' >&2
    die "apt-get update (package lists into $APT_DIR) failed (see above): are Debian's mirrors reachable from here?" 3
  fi
  if ! download -c "$APT_DIR/apt.conf" >"$log" 2>&1; then
    sed 's/^/  /' "$log" >&2
    die "apt-get download ${wanted[*]} failed (see above)" 3
  fi
fi

for pkg in "${wanted[@]}"; do
  deb=$(find "$DOWNLOADS" -maxdepth 1 -name "${pkg}_*.deb" | head -n1)
  [ -n "$deb" ] || die "apt-get download reported success but no ${pkg}_*.deb is in $DOWNLOADS"
  dpkg -x "$deb" "$DEST" || die "dpkg -x $deb $DEST failed"
  version=$(dpkg-deb -f "$deb" Version)
  printf '%s\n' "$version" >"$STAMPS/$pkg"
  say "unpacked $pkg $version into $DEST"
done
