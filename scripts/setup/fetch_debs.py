#!/usr/bin/env python3
"""scripts/setup/fetch_debs.py DEST PKG...: fetches Debian packages straight from Debian's package
pool and unpacks them under DEST (DEST/usr/include/..., DEST/usr/share/...), with Python's
standard library only: no apt-get, no dpkg, no root. scripts/setup/setup.sh uses it, with
DEST=.venv/debs, where apt-get is missing (RHEL, Rocky, any non-Debian Linux) or where
scripts/setup/fetch-debs.sh (apt-get download + dpkg -x) fails; build.rs finds Gloo's headers in
.venv/debs/usr/include. It is self-contained, so that tests/tooling/setup_no_root.rs can run a
copy of it as an unprivileged user with apt-get and dpkg hidden.

What it does, for Debian 12 (bookworm), component main, this machine's architecture:
  1. dists/bookworm/InRelease (or Release) from the mirror; its PGP signature is checked with
     gpgv where gpgv and Debian's archive keyring are at hand (Debian/Ubuntu), otherwise the
     index rests on the transport (the default mirror is HTTPS);
  2. dists/bookworm/main/binary-ARCH/Packages.xz, checked against the SHA256 and size that
     the Release file lists for it (by hash where the mirror offers it, so that a mirror update
     in between cannot mismatch them);
  3. each package's pool/... file named by that index, checked against the index's SHA256 and
     size;
  4. the .deb is an `ar` archive (parsed here) holding data.tar.xz (or .gz; .zst needs
     Python 3.14 or a `zstd` program); its members are extracted into DEST with safe paths
     only: no absolute names, no `..`, no devices, links kept inside DEST (an absolute symlink
     is made relative to DEST), no setuid bits (plus tarfile's "data" filter where this Python
     has it).
The packages are unpacked as they are (no dependencies): the ones setup.sh asks for are
header-only, data, or a program that needs only the C library (libgloo-dev, fonts-dejavu-core,
nasm; nasm from bookworm needs glibc >= 2.34).

Mirror: $TRAINBOOK_DEBIAN_MIRROR if set (only it); otherwise the Debian mirrors named in
/etc/apt/sources.list{,.d/*.list,.d/*.sources} (where present) and then
https://deb.debian.org/debian, tried in turn until one serves the index. Also
$TRAINBOOK_DEBIAN_SUITE (default bookworm), $TRAINBOOK_DEBIAN_ARCH (default: from `uname -m`),
$TRAINBOOK_DEBIAN_KEYRING (default /usr/share/keyrings/debian-archive-keyring.gpg). Proxies
from http_proxy/https_proxy, as usual.

Idempotent, like fetch-debs.sh, with the same stamps: DEST/.unpacked/PKG holds the unpacked
version, and a package with a stamp is not fetched again.

Exit status (as fetch-debs.sh): 0 every package is unpacked; 3 a package could not be
downloaded (no network, no mirror, no such package); 1 anything else (a checksum or signature
that does not match, an archive that cannot be unpacked).
"""

from __future__ import annotations

import glob
import hashlib
import io
import lzma
import gzip
import os
import platform
import posixpath
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request

DEFAULT_MIRROR = "https://deb.debian.org/debian"
DEFAULT_SUITE = "bookworm"
COMPONENT = "main"
DEFAULT_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
TIMEOUT_S = 60
# uname -m -> Debian's architecture names.
ARCHES = {
    "x86_64": "amd64",
    "amd64": "amd64",
    "aarch64": "arm64",
    "arm64": "arm64",
    "ppc64le": "ppc64el",
    "s390x": "s390x",
    "i686": "i386",
    "i386": "i386",
}


class Fail(Exception):
    """An error to report with the given exit status (3: cannot download, 1: anything else)."""

    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


def say(message: str) -> None:
    print(f"[setup] {message}", flush=True)


def architecture() -> str:
    if os.environ.get("TRAINBOOK_DEBIAN_ARCH"):
        return os.environ["TRAINBOOK_DEBIAN_ARCH"]
    machine = platform.machine()
    if machine not in ARCHES:
        raise Fail(
            f"no Debian architecture known for this machine ({machine!r}): "
            "set TRAINBOOK_DEBIAN_ARCH"
        )
    return ARCHES[machine]


def apt_source_mirrors() -> list[str]:
    """The Debian archive URIs (ending in /debian) in the system's apt sources, in order."""
    found = []
    files = ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list"))
    for path in files:
        try:
            lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
        except OSError:
            continue
        for line in lines:
            words = line.split("#", 1)[0].split()
            if not words or words[0] != "deb":
                continue
            words = words[1:]
            if words and words[0].startswith("["):  # options: [arch=amd64 signed-by=...]
                while words and not words[0].endswith("]"):
                    words = words[1:]
                words = words[1:]
            if words:
                found.append(words[0])
    for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
        try:
            text = open(path, encoding="utf-8", errors="replace").read()
        except OSError:
            continue
        for stanza in text.split("\n\n"):
            fields = {}
            for line in stanza.splitlines():
                if line.startswith("#") or ":" not in line or line[:1].isspace():
                    continue
                key, value = line.split(":", 1)
                fields[key.strip().lower()] = value.strip()
            enabled = fields.get("enabled", "yes").lower() != "no"
            if enabled and "deb" in fields.get("types", "").split():
                found.extend(fields.get("uris", "").split())
    mirrors = []
    for uri in found:
        uri = uri.rstrip("/")
        web = uri.startswith(("http://", "https://"))
        if web and uri.endswith("/debian") and uri not in mirrors:
            mirrors.append(uri)
    return mirrors


def mirrors() -> list[str]:
    chosen = os.environ.get("TRAINBOOK_DEBIAN_MIRROR", "").strip()
    if chosen:
        return [chosen.rstrip("/")]
    found = apt_source_mirrors()
    return found + [DEFAULT_MIRROR] if DEFAULT_MIRROR not in found else found


def download(url: str, what: str) -> bytes:
    request = urllib.request.Request(url, headers={"User-Agent": "trainbook-fetch-debs/1"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return response.read()
    except urllib.error.HTTPError as e:
        raise Fail(f"{what}: {url}: HTTP {e.code} {e.reason}", 3) from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise Fail(f"{what}: {url}: {reason}", 3) from None


def check(data: bytes, sha256: str, size: int | None, what: str, url: str) -> None:
    if size is not None and len(data) != size:
        raise Fail(f"{what}: {url} has {len(data)} bytes, the index says {size}")
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256.lower():
        raise Fail(f"{what}: {url} has SHA256 {digest}, the index says {sha256}")


def verify_signature(signed: bytes, detached: bytes | None, url: str) -> str:
    """Checks the Release file's signature with gpgv where possible. Returns a note on what was
    checked; raises Fail on a bad signature."""
    keyring = os.environ.get("TRAINBOOK_DEBIAN_KEYRING") or DEFAULT_KEYRING
    gpgv = shutil.which("gpgv")
    if not gpgv or not os.path.isfile(keyring):
        why = "no gpgv" if not gpgv else f"no Debian keyring at {keyring}"
        return f"signature not checked ({why}); the index rests on {url.split(':', 1)[0].upper()}"
    with tempfile.TemporaryDirectory(prefix="trainbook-gpgv-") as tmp:
        signed_path = os.path.join(tmp, "Release")
        with open(signed_path, "wb") as f:
            f.write(signed)
        args = [gpgv, "--homedir", tmp, "--status-fd", "1", "--keyring", os.path.abspath(keyring)]
        if detached is not None:
            sig_path = os.path.join(tmp, "Release.gpg")
            with open(sig_path, "wb") as f:
                f.write(detached)
            args += [sig_path, signed_path]
        else:
            args += [signed_path]
        result = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    status = result.stdout
    if result.returncode == 0 and "[GNUPG:] VALIDSIG" in status:
        return f"signature checked with {keyring}"
    if "[GNUPG:] BADSIG" in status:
        raise Fail(f"the signature of {url} is bad (gpgv with {keyring}):\n{result.stderr.strip()}")
    # No public key for it (an older keyring), an expired key, ...: not checkable here.
    reason = (result.stderr.strip().splitlines() or ["gpgv failed"])[-1]
    return f"signature not checked ({reason}); the index rests on {url.split(':', 1)[0].upper()}"


def release_file(mirror: str, suite: str) -> tuple[str, str]:
    """The Release file's text (signature checked where possible) and a note on the check."""
    base = f"{mirror}/dists/{suite}"
    try:
        signed = download(f"{base}/InRelease", "the index of the index")
        note = verify_signature(signed, None, f"{base}/InRelease")
        text = signed.decode("utf-8", errors="replace")
        if text.startswith("-----BEGIN PGP SIGNED MESSAGE-----"):
            text = text.split("\n\n", 1)[1].split("\n-----BEGIN PGP SIGNATURE-----", 1)[0]
        return text, note
    except Fail as e:
        if "HTTP 404" not in str(e):
            raise
    plain = download(f"{base}/Release", "the index of the index")
    try:
        detached = download(f"{base}/Release.gpg", "the index's signature")
        note = verify_signature(plain, detached, f"{base}/Release")
    except Fail as e:
        if e.status != 3:
            raise
        scheme = base.split(":", 1)[0].upper()
        note = f"signature not checked (no Release.gpg); the index rests on {scheme}"
    return plain.decode("utf-8", errors="replace"), note


def release_sha256(text: str) -> tuple[dict[str, tuple[str, int]], bool]:
    """The SHA256 list of a Release file (path -> (hash, size)) and whether it offers by-hash."""
    entries: dict[str, tuple[str, int]] = {}
    by_hash = False
    section = None
    for line in text.splitlines():
        if not line[:1].isspace():
            key = line.split(":", 1)[0]
            section = key
            if key == "Acquire-By-Hash":
                by_hash = line.split(":", 1)[1].strip().lower() == "yes"
            continue
        if section == "SHA256":
            parts = line.split()
            if len(parts) == 3:
                entries[parts[2]] = (parts[0], int(parts[1]))
    return entries, by_hash


def packages_index(mirror: str, suite: str, arch: str) -> tuple[str, str]:
    """The text of main/binary-ARCH/Packages, checked against the Release file, and the note on
    the Release file's signature."""
    text, note = release_file(mirror, suite)
    sums, by_hash = release_sha256(text)
    if not sums:
        raise Fail(f"{mirror}/dists/{suite}/InRelease lists no SHA256 checksums")
    directory = f"{COMPONENT}/binary-{arch}"
    indexes = (
        ("Packages.xz", lzma.decompress),
        ("Packages.gz", gzip.decompress),
        ("Packages", bytes),
    )
    for name, decompress in indexes:
        path = f"{directory}/{name}"
        if path not in sums:
            continue
        sha256, size = sums[path]
        plain_url = f"{mirror}/dists/{suite}/{path}"
        hashed_url = f"{mirror}/dists/{suite}/{directory}/by-hash/SHA256/{sha256}"
        url = hashed_url if by_hash else plain_url
        try:
            data = download(url, "the package index")
        except Fail:
            if url == plain_url:
                raise
            url = plain_url
            data = download(url, "the package index")
        check(data, sha256, size, "the package index", url)
        try:
            return decompress(data).decode("utf-8", errors="replace"), note
        except (lzma.LZMAError, OSError, EOFError) as e:
            raise Fail(f"the package index {url} does not decompress: {e}") from None
    raise Fail(
        f"{mirror}/dists/{suite}/InRelease lists no {directory}/Packages index "
        f"(is {arch} a Debian architecture?)",
        3,
    )


def find_packages(index: str, wanted: list[str]) -> dict[str, dict[str, str]]:
    """The index's stanzas (field -> value) of the wanted packages."""
    found: dict[str, dict[str, str]] = {}
    targets = {f"Package: {name}" for name in wanted}
    for stanza in index.split("\n\n"):
        first = stanza.lstrip("\n").split("\n", 1)[0]
        if first not in targets:
            continue
        fields = {}
        for line in stanza.strip("\n").splitlines():
            if line[:1].isspace() or ":" not in line:
                continue
            key, value = line.split(":", 1)
            fields[key] = value.strip()
        found.setdefault(fields["Package"], fields)
    return found


def ar_members(data: bytes, what: str) -> dict[str, bytes]:
    """The members of an `ar` archive (a .deb): an 8-byte magic, then per member a 60-byte header
    (name 16, mtime 12, uid 6, gid 6, mode 8, size 10, magic "`\\n") and the data, padded to an
    even length."""
    if data[:8] != b"!<arch>\n":
        raise Fail(f"{what} is not a Debian package (no ar magic)")
    members = {}
    pos = 8
    while pos < len(data):
        header = data[pos : pos + 60]
        if len(header) < 60 or header[58:60] != b"`\n":
            raise Fail(f"{what}: a broken ar header at byte {pos}")
        name = header[0:16].decode("ascii", errors="replace").strip().rstrip("/")
        try:
            size = int(header[48:58].decode("ascii").strip())
        except ValueError:
            raise Fail(f"{what}: a broken ar member size at byte {pos}") from None
        start = pos + 60
        if start + size > len(data):
            raise Fail(f"{what}: the ar member {name} is cut short")
        members[name] = data[start : start + size]
        pos = start + size + (size % 2)
    return members


def open_data_tar(members: dict[str, bytes], what: str) -> tarfile.TarFile:
    for name, mode in (("data.tar.xz", "r:xz"), ("data.tar.gz", "r:gz"), ("data.tar", "r:")):
        if name in members:
            return tarfile.open(fileobj=io.BytesIO(members[name]), mode=mode)
    if "data.tar.zst" in members:
        if sys.version_info >= (3, 14):
            return tarfile.open(fileobj=io.BytesIO(members["data.tar.zst"]), mode="r:zst")
        zstd = shutil.which("zstd")
        if zstd:
            plain = subprocess.run(
                [zstd, "-dc"], input=members["data.tar.zst"], stdout=subprocess.PIPE, check=True
            ).stdout
            return tarfile.open(fileobj=io.BytesIO(plain), mode="r:")
        raise Fail(
            f"{what} holds data.tar.zst: zstd-compressed, which Python's standard library "
            f"reads only from Python 3.14 ({sys.version.split()[0]} here), and no `zstd` "
            "program is on PATH: "
            "run this with Python >= 3.14 or put zstd on PATH"
        )
    raise Fail(f"{what} holds no data.tar.* (members: {', '.join(members)})")


def safe_members(tar: tarfile.TarFile, what: str):
    """The tar's members with safe names only (see the module's doc), adjusted in place."""
    for member in tar.getmembers():
        name = posixpath.normpath(member.name)
        if name in (".", ""):
            continue
        if name.startswith("/") or name == ".." or name.startswith("../"):
            raise Fail(f"{what}: unsafe member name {member.name!r}")
        member.name = name
        if member.issym():
            target = member.linkname
            if target.startswith("/"):  # absolute: make it point inside DEST
                target = posixpath.relpath(target, "/" + posixpath.dirname(name))
            resolved = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
            if resolved == ".." or resolved.startswith("../") or resolved.startswith("/"):
                raise Fail(f"{what}: the link {name} -> {member.linkname} leaves the folder")
            member.linkname = target
        elif member.islnk():
            target = posixpath.normpath(member.linkname)
            if target.startswith("/") or target == ".." or target.startswith("../"):
                raise Fail(f"{what}: the hard link {name} -> {member.linkname} leaves the folder")
            member.linkname = target
        elif not (member.isdir() or member.isfile()):
            continue  # devices, fifos: nothing the build needs
        member.mode &= 0o755  # no setuid/setgid/sticky, no group/other write
        member.uid, member.gid = os.getuid(), os.getgid()
        member.uname = member.gname = ""
        yield member


def unpack(deb: bytes, dest: str, what: str) -> None:
    members = ar_members(deb, what)
    try:
        with open_data_tar(members, what) as tar:
            safe = list(safe_members(tar, what))
            if hasattr(tarfile, "data_filter"):  # 3.12+, and 3.10.12+/3.11.4+
                tar.extractall(dest, members=safe, filter="data")
            else:
                tar.extractall(dest, members=safe)
    except (tarfile.TarError, lzma.LZMAError, EOFError, OSError,
            subprocess.CalledProcessError) as e:
        raise Fail(f"{what}: cannot unpack into {dest}: {e}") from None


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        raise Fail(f"usage: {os.path.basename(sys.argv[0])} DEST PKG...")
    os.makedirs(argv[0], exist_ok=True)
    dest = os.path.realpath(argv[0])
    stamps = os.path.join(dest, ".unpacked")
    os.makedirs(stamps, exist_ok=True)
    wanted = []
    for pkg in argv[1:]:
        stamp = os.path.join(stamps, pkg)
        version = open(stamp).read().strip() if os.path.isfile(stamp) else ""
        if version:
            say(f"ok: {pkg} ({version}, unpacked in {dest})")
        elif pkg not in wanted:
            wanted.append(pkg)
    if not wanted:
        return 0

    suite = os.environ.get("TRAINBOOK_DEBIAN_SUITE") or DEFAULT_SUITE
    arch = architecture()
    errors = []
    for mirror in mirrors():
        say(
            f"fetching {' '.join(wanted)} from {mirror} (Debian {suite}, {COMPONENT}, {arch}; "
            f"no apt-get, dpkg or root needed) into {dest}"
        )
        try:
            index, note = packages_index(mirror, suite, arch)
            break
        except Fail as e:
            if e.status != 3:
                raise
            say(f"cannot read the package index from {mirror}: {e}")
            errors.append(str(e))
    else:
        raise Fail(
            "no Debian mirror could be read (set TRAINBOOK_DEBIAN_MIRROR to one that is "
            "reachable from here):\n  " + "\n  ".join(errors),
            3,
        )
    say(f"package index of {suite}/{COMPONENT}/{arch} checked against its Release file; {note}")

    found = find_packages(index, wanted)
    missing = [pkg for pkg in wanted if pkg not in found]
    if missing:
        index_url = f"{mirror}/dists/{suite}/{COMPONENT}/binary-{arch}/Packages"
        raise Fail(f"no package {', '.join(missing)} in {index_url}", 3)
    for pkg in wanted:
        fields = found[pkg]
        url = f"{mirror}/{fields['Filename']}"
        what = f"{pkg} {fields.get('Version', '?')} ({url})"
        if "SHA256" not in fields:
            raise Fail(f"{what}: the package index gives no SHA256 for it")
        deb = download(url, pkg)
        check(deb, fields["SHA256"], int(fields["Size"]) if "Size" in fields else None, pkg, url)
        unpack(deb, dest, what)
        with open(os.path.join(stamps, pkg), "w") as f:
            f.write(fields.get("Version", "?") + "\n")
        say(f"unpacked {pkg} {fields.get('Version', '?')} into {dest} (SHA256 checked)")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Fail as e:
        print(f"[setup] error: {e}", file=sys.stderr)
        sys.exit(e.status)
    except KeyboardInterrupt:
        sys.exit(130)
