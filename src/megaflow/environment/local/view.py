"""One prepared read-only root per image, bound whole into each sandbox.

bubblewrap made every sandbox's root from scratch: a tmpfs, one read-only
bind per top-level entry of the image (each a bind and a remount), one per
hidden path, the mount points, and a final remount: 54 mount calls per start
for the host image, each taking the kernel's global mount lock. Run as root,
the runtime instead builds that tree once per image and workdir, below the
staging root (``/run/megaflow/<process>/view-<name>``): a private tmpfs whose
directories, symlinks and read-only binds are what :func:`launcher.root_binds`
describes, with every mount in it already read-only, nosuid and nodev, so
bubblewrap's recursive ``--ro-bind <view> /`` is one mount call and remounts
nothing. Per start there remain ``/proc``, ``/dev`` and the three writable
binds. Unmounting the view (a detach of the whole tree) is
:func:`userns.unstage`, so the reaper removes a crashed process's views with
its stages.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from megaflow.environment.local import userns

MS_RDONLY, MS_REMOUNT, MS_PRIVATE = 1, 32, 1 << 18
_LOCKED = MS_RDONLY | userns.MS_NOSUID | userns.MS_NODEV
# Mount points every sandbox mounts over or binds onto (launcher.bwrap_argv).
MOUNT_POINTS = ("proc", "dev", "run", "tmp", "root")


def _mounts_below(target: Path) -> list[str]:
    """Mount points at or below ``target`` in this process's mount table, outermost first."""
    prefix = str(target)
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), line.split()[4])
            if point == prefix or point.startswith(prefix + "/"):
                found.append(point)
    return sorted(found, key=len)


def _lock(target: Path) -> None:
    """Make the mount at ``target`` and every mount below it read-only, nosuid, nodev."""
    for point in _mounts_below(target):
        userns._mount("none", point, None, userns.MS_BIND | MS_REMOUNT | _LOCKED, None)


class _Builder:
    def __init__(self, root: Path, owner: tuple[int, int]) -> None:
        self.root = root
        self.owner = owner
        self.perms = 0o755

    def at(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def mkdir(self, path: str) -> Path:
        """``path`` in the view with its missing parents, owned by the sandbox's root."""
        target = self.at(path)
        missing = [p for p in [*reversed(target.parents), target] if p.is_relative_to(self.root)]
        for p in missing:
            if not p.exists():
                p.mkdir()
                os.chown(p, *self.owner)
                p.chmod(self.perms)
        return target

    def apply(self, args: list[str]) -> None:
        """Carry out bubblewrap-style ``--ro-bind``, ``--symlink``, ``--dir``,
        ``--perms`` and ``--tmpfs`` arguments on the view."""
        i = 0
        while i < len(args):
            op = args[i]
            if op == "--perms":
                self.perms = int(args[i + 1], 8)
                i += 2
                continue
            if op == "--dir":
                self.mkdir(args[i + 1])
            elif op == "--tmpfs":
                target = self.mkdir(args[i + 1])
                userns._mount("megaflow", str(target), "tmpfs", _LOCKED, "mode=0755")
            elif op == "--symlink":
                self.mkdir(str(Path(args[i + 2]).parent))
                link = self.at(args[i + 2])
                os.symlink(args[i + 1], link)
                os.lchown(link, *self.owner)
                i += 3
                self.perms = 0o755
                continue
            elif op == "--ro-bind":
                source, dest = Path(args[i + 1]), self.at(args[i + 2])
                if not dest.exists():
                    if source.is_dir():
                        self.mkdir(args[i + 2])
                    else:
                        self.mkdir(str(Path(args[i + 2]).parent))
                        dest.touch()
                userns._mount(str(source), str(dest), None, userns.MS_BIND | userns.MS_REC, None)
                _lock(dest)
                i += 3
                self.perms = 0o755
                continue
            else:
                raise ValueError(f"a prepared view cannot do {op!r}")
            i += 2
            self.perms = 0o755


def build(target: Path, args: list[str], workdir: str, owner: tuple[int, int]) -> None:
    """Mount the view at ``target`` (an empty directory): ``args`` as bubblewrap
    would apply them to its root, the mount points, then everything read-only.
    On error whatever was mounted is detached."""
    userns._mount("megaflow", str(target), "tmpfs", userns.MS_NOSUID | userns.MS_NODEV,
                  f"mode=0755,uid={owner[0]},gid={owner[1]}")  # fmt: skip
    try:
        userns._mount("none", str(target), None, MS_PRIVATE | userns.MS_REC, None)
        made = _Builder(target, owner)
        made.apply(args)
        for name in MOUNT_POINTS:
            made.mkdir(name)
        made.mkdir(workdir)
        _lock(target)
    except BaseException:
        userns.umount(target)
        raise
