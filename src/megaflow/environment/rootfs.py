"""A tiny root filesystem built from a static busybox, for sandboxes and tests.

Nothing can be pulled from an image registry on an offline machine, so the
smallest useful Linux userland is assembled here from one static binary: the
``busybox`` of Debian's ``busybox-static`` package, with its applets (``sh``,
``ls``, ``cat``, ``sleep``, ``timeout``, ``setsid``...) linked to it. The
tarball is deterministic (sorted entries, fixed owners and times, no
compression), so equal inputs give equal bytes and it can be content-addressed:
the local runtime unpacks it into its image cache, the container runtime's
tests ``podman import`` it as an image.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import struct
import subprocess
import tarfile
from pathlib import Path

from megaflow.core.errors import SandboxStartError

BUSYBOX_PACKAGE = "busybox-static"

# Applets every rootfs gets, even when the busybox at hand cannot list its own.
CORE_APPLETS: tuple[str, ...] = (
    "bin/sh", "bin/ash", "bin/ls", "bin/cat", "bin/echo", "bin/sleep", "bin/mkdir",
    "bin/rm", "bin/cp", "bin/mv", "bin/ln", "bin/chmod", "bin/touch", "bin/pwd",
    "bin/ps", "bin/kill", "bin/true", "bin/false", "bin/grep", "bin/sed", "bin/tar",
    "bin/env", "bin/id", "bin/head", "bin/tail", "bin/wc", "bin/sort", "bin/uname",
    "bin/dd", "bin/find", "bin/test", "bin/timeout", "bin/setsid", "bin/printf",
    "bin/yes", "bin/seq", "bin/nc", "bin/wget", "bin/stat", "bin/xargs", "bin/awk",
)  # fmt: skip

_ETC_FILES: dict[str, str] = {
    "etc/passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n",
    "etc/group": "root:x:0:\nnogroup:x:65534:\n",
    "etc/hosts": "127.0.0.1 localhost\n::1 localhost\n",
    "etc/hostname": "sandbox\n",
}
_DIRS: tuple[str, ...] = (
    "bin", "dev", "etc", "proc", "root", "sbin", "sys", "tmp", "usr", "usr/bin",
    "usr/sbin", "var", "var/tmp", "workspace",
)  # fmt: skip
_MTIME = 0  # fixed time stamp: the tarball's bytes depend only on its content


def find_busybox() -> Path:
    """The static busybox binary, or an error naming the package to install."""
    found = shutil.which("busybox") or ("/bin/busybox" if Path("/bin/busybox").exists() else None)
    if found is None:
        raise SandboxStartError(
            f"busybox not found on PATH; install the {BUSYBOX_PACKAGE!r} package "
            f"(apt-get install {BUSYBOX_PACKAGE})"
        )
    path = Path(found).resolve()
    if not is_static_elf(path):
        raise SandboxStartError(
            f"{path} is dynamically linked and cannot run in an empty root filesystem; "
            f"install the {BUSYBOX_PACKAGE!r} package"
        )
    return path


def is_static_elf(path: Path) -> bool:
    """True when ``path`` is an ELF binary without a program interpreter (PT_INTERP)."""
    with path.open("rb") as f:
        head = f.read(64)
        if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2:  # 64-bit only
            return False
        endian = "<" if head[5] == 1 else ">"
        phoff, phentsize, phnum = (
            struct.unpack_from(endian + "Q", head, 32)[0],
            struct.unpack_from(endian + "H", head, 54)[0],
            struct.unpack_from(endian + "H", head, 56)[0],
        )
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    pt_interp = 3
    return all(
        struct.unpack_from(endian + "I", table, i * phentsize)[0] != pt_interp for i in range(phnum)
    )


def list_applets(busybox: Path) -> list[str]:
    """The applets ``busybox`` provides, as paths relative to the root (``bin/sh``)."""
    try:
        out = subprocess.run(
            [str(busybox), "--list-full"], capture_output=True, text=True, timeout=10, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return list(CORE_APPLETS)
    applets = {line.strip().lstrip("/") for line in out.splitlines() if line.strip()}
    return sorted(applets | set(CORE_APPLETS))


def build_busybox_rootfs(dest: Path, busybox: Path | None = None) -> Path:
    """Write a busybox root filesystem as an uncompressed tarball to ``dest``.

    The same busybox binary always yields the same bytes. Returns ``dest``.
    """
    busybox = busybox or find_busybox()
    if not busybox.is_file():
        raise SandboxStartError(f"busybox binary {busybox} does not exist")
    applets = [a for a in list_applets(busybox) if a != "bin/busybox"]
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    try:
        with tarfile.open(tmp, "w", format=tarfile.GNU_FORMAT) as tar:
            dirs = (set(_DIRS) | {str(Path(a).parent) for a in applets}) - {"."}
            for d in sorted(dirs):
                mode = 0o1777 if d in ("tmp", "var/tmp") else 0o700 if d == "root" else 0o755
                tar.addfile(_info(d, tarfile.DIRTYPE, mode))
            data = busybox.read_bytes()
            tar.addfile(_info("bin/busybox", tarfile.REGTYPE, 0o755, len(data)), io.BytesIO(data))
            for name, text in sorted(_ETC_FILES.items()):
                raw = text.encode()
                tar.addfile(_info(name, tarfile.REGTYPE, 0o644, len(raw)), io.BytesIO(raw))
            for applet in applets:
                link = _info(applet, tarfile.SYMTYPE, 0o777)
                link.linkname = "/bin/busybox"
                tar.addfile(link)
        tmp.replace(dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


def file_digest(path: Path) -> str:
    """The sha256 hex digest of a file, for content-addressed caches."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _info(name: str, kind: bytes, mode: int, size: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.size = size
    info.mtime = _MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info
