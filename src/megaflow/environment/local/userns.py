"""Host uids of a local sandbox, and the mounts that let bubblewrap reach its files.

Sandbox uids 0..65535 map to host uids ``base..base+65535``: the exec server
(uid 0 inside) is host ``base``, the agent (uid 1000 inside) host
``base+1000``; host root is not mapped at all. bubblewrap itself runs as
``base``, so it can only reach directories every uid may traverse: a
root-owned runtime directory under a private parent (``/root``, pytest's
0700 temp dirs) is bind-mounted once per runtime at a traversable staging
path below ``/run/megaflow``.

When MegaFlow does not run as root, the caller's ``/etc/subuid`` and
``/etc/subgid`` ranges are mapped with ``newuidmap``/``newgidmap`` instead,
with the agent's uid 1000 being the caller's own uid (so the sandbox can
write the caller's directories without any chown).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import pwd
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from megaflow.core.errors import SandboxStartError

AGENT_ID = 1000  # uid and gid of agent commands inside the sandbox
SPAN = 65536  # sandbox uids mapped
STAGE_ROOT = Path("/run/megaflow")
MS_BIND, MS_NOSUID, MS_NODEV, MS_REC, MS_REMOUNT = 4096, 2, 4, 16384, 32
MNT_DETACH = 2
_libc = ctypes.CDLL(None, use_errno=True)


@dataclass(frozen=True)
class IdMap:
    """How one runtime maps sandbox ids; ``agent_host`` owns what the agent writes."""

    uid_lines: str
    gid_lines: str
    agent_uid: int  # host uid of the agent
    agent_gid: int
    run_as: tuple[int, int] | None  # (uid, gid) bubblewrap starts as; None: as we are
    helpers: bool  # maps written by newuidmap/newgidmap


def _sub_range(path: Path, user: str, uid: int) -> tuple[int, int] | None:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.strip().split(":")
        if len(parts) != 3 or parts[0] not in (user, str(uid)):
            continue
        if parts[1].isdigit() and parts[2].isdigit() and int(parts[2]) > AGENT_ID + 1:
            return int(parts[1]), int(parts[2])
    return None


def _split_map(start: int, count: int, own: int) -> str:
    """Inside 0..count-1 onto the sub range, but inside 1000 onto ``own``."""
    rest = count - AGENT_ID - 1
    return (
        f"0 {start} {AGENT_ID}\n{AGENT_ID} {own} 1\n{AGENT_ID + 1} {start + AGENT_ID + 1} {rest}\n"
    )


def id_map(base: int, etc: Path = Path("/etc")) -> IdMap:
    uid, gid = os.getuid(), os.getgid()
    if uid == 0:
        line = f"0 {base} {SPAN}\n"
        return IdMap(line, line, base + AGENT_ID, base + AGENT_ID, (base, base), False)
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    subuid = _sub_range(etc / "subuid", user, uid)
    subgid = _sub_range(etc / "subgid", user, uid)
    if subuid is None or subgid is None:
        raise SandboxStartError(
            f"MegaFlow runs as uid {uid} ({user}), not root, and {etc}/subuid or {etc}/subgid "
            f"has no range for it: add e.g. '{user}:{base}:{SPAN}' to both "
            "(usermod --add-subuids/--add-subgids) and install the 'uidmap' package"
        )
    return IdMap(_split_map(*subuid, uid), _split_map(*subgid, gid), uid, gid, None, helpers=True)


async def write_maps(pid: int, ids: IdMap) -> None:
    """Give the user namespace of ``pid`` its uid and gid maps."""
    if not ids.helpers:
        for name, text in (("uid_map", ids.uid_lines), ("gid_map", ids.gid_lines)):
            put(f"/proc/{pid}/{name}", text)
        return
    for tool, text in (("newuidmap", ids.uid_lines), ("newgidmap", ids.gid_lines)):
        args = [str(pid), *text.split()]
        try:
            proc = await asyncio.create_subprocess_exec(
                tool, *args, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
            )
        except FileNotFoundError as e:
            raise SandboxStartError(f"{tool} is missing: install the 'uidmap' package") from e
        _, err = await proc.communicate()
        if proc.returncode != 0:
            raise SandboxStartError(f"{tool} {' '.join(args)} failed: {err.decode().strip()}")


def put(path: str, text: str) -> None:
    """One write(2) to a proc or cgroup file (never blocks on a disk)."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    rc = _libc.mount(
        source.encode(), target.encode(), fstype.encode() if fstype else None,
        ctypes.c_ulong(flags), data.encode() if data else None,
    )  # fmt: skip
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def umount(target: Path) -> None:
    """Detach the mount at ``target``; nothing mounted there is fine."""
    if _libc.umount2(str(target).encode(), MNT_DETACH) != 0:
        err = ctypes.get_errno()
        if err not in (22, 2):  # EINVAL: not a mount point; ENOENT
            raise OSError(err, f"umount {target}: {os.strerror(err)}")


def bind(source: Path, target: Path) -> None:
    _mount(str(source), str(target), None, MS_BIND, None)


def mount_tmpfs(target: Path, size_bytes: int) -> None:
    _mount("megaflow", str(target), "tmpfs", MS_NOSUID | MS_NODEV, f"size={size_bytes},mode=0711")


def reachable(path: Path, uid: int) -> bool:
    """Whether ``uid`` (no groups) may traverse every directory down to ``path``."""
    for parent in [*reversed(path.parents), path]:
        try:
            st = parent.stat()
        except OSError:
            return False
        bit = 0o100 if st.st_uid == uid else 0o001
        if not st.st_mode & bit:
            return False
    return True


def stage(source: Path, process: str, name: str) -> Path:
    """Bind ``source`` at ``/run/megaflow/<process>/<name>`` (every parent 0711),
    nosuid and nodev: bubblewrap's binds of paths below it then already carry
    the flags it wants and cost one mount call each, not a bind and a remount."""
    target = STAGE_ROOT / process / name
    for path in (STAGE_ROOT, target.parent, target):
        path.mkdir(mode=0o711, exist_ok=True)
        path.chmod(0o711)
    bind(source, target)
    try:
        _mount("none", str(target), None, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV, None)
    except OSError:
        umount(target)
        raise
    return target


def unstage(target: Path) -> None:
    umount(target)
    for path in (target, target.parent):
        try:
            path.rmdir()
        except OSError:
            break


def reap_stages(alive: Callable[[str], bool]) -> None:
    """Unmount and remove the staging directories of processes that are gone."""
    try:
        owners = list(STAGE_ROOT.iterdir())
    except OSError:
        return
    for owner in owners:
        if alive(owner.name):
            continue
        try:  # another process's reaper may have removed it since the listing
            targets = sorted(owner.iterdir(), key=lambda p: p.name)
        except FileNotFoundError:
            continue
        for target in targets:
            with contextlib.suppress(OSError):
                unstage(target)
        with contextlib.suppress(OSError):
            owner.rmdir()
