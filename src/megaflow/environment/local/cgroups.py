"""cgroup limits and statistics for local sandboxes, on cgroup v1 or v2.

Each sandbox gets one group per controller, at
``<controller mount>/megaflow/<owner>/<sandbox id>`` where ``<owner>`` names
the MegaFlow process (pid and start time) that made it. The reaper uses that
owner part to find groups a crashed process left behind. On v1 there is one
hierarchy per controller (memory, cpu, cpuacct, pids, and freezer where it is
mounted); on v2 a single unified hierarchy with the three controllers enabled
below ``megaflow`` (freezing is built into v2).

The processes that must outlive a kill (bubblewrap, the sandbox's init and
the exec server) are read from the group right after the sandbox started,
before anything of the agent ran (:meth:`SandboxCgroup.pin`); every kill
after that ends all the others through the group (:mod:`.freezer`).
"""

from __future__ import annotations

import contextlib
import errno
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from megaflow.core.errors import ConfigError
from megaflow.environment.abstract import SandboxResources, SandboxStats
from megaflow.environment.local import freezer

CGROUP_ROOT = Path("/sys/fs/cgroup")
GROUP = "megaflow"
V1_CONTROLLERS = ("memory", "cpu", "cpuacct", "pids")
V1_FREEZER = "freezer"  # optional: without it a sandbox whose kill leaves a survivor is destroyed
V2_CONTROLLERS = ("memory", "cpu", "pids")
CFS_PERIOD_US = 100_000
CgroupMode = Literal["auto", "v1", "v2", "off"]
# Runs first, as root, in the process that becomes bubblewrap: it moves itself
# into each of the sandbox's groups ("$1" up to "--"), then execs the rest, so
# bubblewrap and everything it starts are in the groups from their first
# instruction. A group that cannot be joined (the reaper removed it after the
# maker died) ends it before anything of the sandbox exists.
_JOIN = 'while [ "$1" != -- ]; do echo $$ >"$1" || exit 125; shift; done; shift; exec "$@"'


def _write(path: Path, value: str) -> None:
    path.write_text(value)


def _read_int(path: Path, default: int = 0) -> int:
    try:
        text = path.read_text().split()
        return int(text[0]) if text and text[0] != "max" else default
    except (OSError, ValueError):
        return default


@dataclass(frozen=True)
class CgroupLayout:
    """Where the controllers are mounted, and which cgroup version they speak."""

    version: Literal[1, 2]
    mounts: dict[str, Path]  # controller -> hierarchy root of our groups' parent

    def base(self, controller: str) -> Path:
        return self.mounts[controller] / GROUP

    def bases(self) -> list[Path]:
        return sorted({self.base(c) for c in self.mounts})

    def prepare(self) -> None:
        """Create ``megaflow/`` in every hierarchy (and enable v2 controllers)."""
        for base in self.bases():
            base.mkdir(exist_ok=True)
        if self.version == 2:
            root = self.mounts["memory"]
            wanted = " ".join("+" + c for c in V2_CONTROLLERS)
            for level in (root, root / GROUP):
                _write(level / "cgroup.subtree_control", wanted)

    def create(self, owner: str, sandbox_id: str, res: SandboxResources) -> SandboxCgroup:
        group = SandboxCgroup(self, owner, sandbox_id)
        try:
            for base in self.bases():
                (base / owner).mkdir(exist_ok=True)
                if self.version == 2:
                    _write(base / owner / "cgroup.subtree_control", "+memory +cpu +pids")
                (base / owner / sandbox_id).mkdir()
            group.limit(res)
        except BaseException:
            group.remove()
            raise
        return group


def detect(mode: CgroupMode, root: Path = CGROUP_ROOT) -> CgroupLayout | None:
    """Find usable controllers. ``auto`` prefers v2 when it has all three
    controllers, else v1; ``off`` gives None (no limits, no stats)."""
    if mode == "off":
        return None
    v2_dir = root if (root / "cgroup.controllers").exists() else root / "unified"
    v2_ok = (v2_dir / "cgroup.controllers").exists() and set(V2_CONTROLLERS) <= set(
        (v2_dir / "cgroup.controllers").read_text().split()
    )
    v1_mounts = {c: root / c for c in V1_CONTROLLERS if (root / c / "cgroup.procs").exists()}
    if mode in ("auto", "v2") and v2_ok:
        layout = CgroupLayout(2, dict.fromkeys(V2_CONTROLLERS, v2_dir))
    elif mode in ("auto", "v1") and len(v1_mounts) == len(V1_CONTROLLERS):
        if (root / V1_FREEZER / "cgroup.procs").exists():
            v1_mounts[V1_FREEZER] = root / V1_FREEZER
        layout = CgroupLayout(1, v1_mounts)
    else:
        missing = [c for c in V1_CONTROLLERS if c not in v1_mounts]
        ctl = v2_dir / "cgroup.controllers"
        have = ctl.read_text().split() if ctl.exists() else []
        raise ConfigError(
            f"cgroup mode {mode!r} is not usable here: v2 at {v2_dir} has controllers "
            f"{have or 'none'} (needs {list(V2_CONTROLLERS)}), v1 is missing {missing}. "
            "Mount the memory, cpu and pids controllers, "
            "or set the local runtime's cgroups option to 'off' (no limits, no stats)"
        )
    try:
        layout.prepare()
    except OSError as e:
        raise ConfigError(
            f"cannot create cgroups under {layout.bases()[0].parent}: {e}. Run as root "
            "with a writable cgroup filesystem, or set the cgroups option to 'off'"
        ) from e
    return layout


class SandboxCgroup:
    """The groups of one sandbox: limits, membership, stats, kill, remove."""

    def __init__(self, layout: CgroupLayout, owner: str, sandbox_id: str) -> None:
        self.layout = layout
        self.dirs = {c: layout.base(c) / owner / sandbox_id for c in layout.mounts}
        self.kept: set[int] | None = None
        """Host pids of bubblewrap, the sandbox's init and the exec server."""
        self.kept_tasks = 0

    @property
    def freeze_dir(self) -> Path | None:
        """The group whose freezing stops every process of the sandbox."""
        return self.dirs["memory"] if self.layout.version == 2 else self.dirs.get(V1_FREEZER)

    def pin(self) -> None:
        """Record the processes a kill leaves alive: call it once the exec
        server said hello and before any command runs, when the group holds
        only bubblewrap, the sandbox's init and the server."""
        self.kept = freezer.members(self.dirs["pids"])
        self.kept_tasks = freezer.tasks(self.dirs["pids"])

    def only_kept(self) -> bool:
        """Whether nothing but the pinned processes lives in the sandbox (one
        task count and one membership read: cheap enough for every kill)."""
        pids = self.dirs["pids"]
        return (
            self.kept is not None
            and freezer.tasks(pids) == self.kept_tasks
            and freezer.members(pids) == self.kept
        )

    def end_others(self, timeout: float = 5.0) -> bool:
        """Kill every process but the pinned ones (freeze, kill, thaw, until
        only they remain); False if that cannot be made true."""
        if self.kept is None:
            return False
        try:
            return freezer.end_all_but(
                self.freeze_dir, self.layout.version, self.dirs["pids"],
                self.kept, self.kept_tasks, timeout,
            )  # fmt: skip
        except OSError:
            return False

    def paths(self) -> list[Path]:
        return sorted(set(self.dirs.values()))

    def procs_files(self) -> list[str]:
        return [str(p / "cgroup.procs") for p in self.paths()]

    def joining(self, argv: list[str]) -> list[str]:
        """``argv``, run from its first instruction inside these groups (v1 has
        no ``clone3(CLONE_INTO_CGROUP)``: a ``/bin/sh`` step joins, then execs)."""
        return ["/bin/sh", "-c", _JOIN, "megaflow-join", *self.procs_files(), "--", *argv]

    def limit(self, res: SandboxResources) -> None:
        mem = res.memory_mb * 1024 * 1024
        quota = int(res.cpus * CFS_PERIOD_US)
        if self.layout.version == 1:
            _write(self.dirs["memory"] / "memory.limit_in_bytes", str(mem))
            _write(self.dirs["cpu"] / "cpu.cfs_period_us", str(CFS_PERIOD_US))
            _write(self.dirs["cpu"] / "cpu.cfs_quota_us", str(quota))
            _write(self.dirs["pids"] / "pids.max", str(res.pids))
        else:
            d = self.dirs["memory"]
            _write(d / "memory.max", str(mem))
            if (d / "memory.swap.max").exists():
                _write(d / "memory.swap.max", "0")
            _write(d / "cpu.max", f"{quota} {CFS_PERIOD_US}")
            _write(d / "pids.max", str(res.pids))

    def stats(self) -> SandboxStats:
        if self.layout.version == 1:
            return SandboxStats(
                cpu_seconds=_read_int(self.dirs["cpuacct"] / "cpuacct.usage") / 1e9,
                memory_bytes=_read_int(self.dirs["memory"] / "memory.usage_in_bytes"),
                memory_peak_bytes=_read_int(self.dirs["memory"] / "memory.max_usage_in_bytes"),
                pids=_read_int(self.dirs["pids"] / "pids.current"),
            )
        d = self.dirs["memory"]
        usage = 0
        try:
            for line in (d / "cpu.stat").read_text().splitlines():
                if line.startswith("usage_usec "):
                    usage = int(line.split()[1])
        except OSError:
            pass
        return SandboxStats(
            cpu_seconds=usage / 1e6,
            memory_bytes=_read_int(d / "memory.current"),
            memory_peak_bytes=_read_int(d / "memory.peak"),
            pids=_read_int(d / "pids.current"),
        )

    def oom_kills(self) -> int:
        """How many processes the memory limit has killed."""
        if self.layout.version == 1:
            return _read_int(self.dirs["memory"] / "memory.failcnt")
        try:
            for line in (self.dirs["memory"] / "memory.events").read_text().splitlines():
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
        except OSError:
            pass
        return 0

    def pids_in(self) -> set[int]:
        return pids_in(self.paths())

    def kill_all(self) -> None:
        """Kill every process in the groups, keeping the groups: through the
        freezing group first, so no process of the sandbox runs between the
        first kill and the last (on v1 the other hierarchies cannot freeze:
        killed there by pid, a parent would see its child die and act, as an
        exec server answering for its command), then whatever is left."""
        first = self.freeze_dir
        rest = [p for p in self.paths() if p != first]
        for path in [first, *rest] if first is not None else rest:
            freezer.kill_group(path)

    def remove(self, timeout: float = 5.0) -> list[Path]:
        """Remove the groups; those still held at the deadline are returned."""
        return remove_groups(self.paths(), timeout)


def pids_in(paths: list[Path]) -> set[int]:
    found: set[int] = set()
    for path in paths:
        try:
            found.update(int(p) for p in (path / "cgroup.procs").read_text().split())
        except (OSError, ValueError):
            pass
    return found


def reclaim(path: Path) -> None:
    """Give back the memory still charged to the emptied memory group ``path``
    (the page cache and reclaimable slab its processes left): a removed memory
    cgroup lives on in the kernel while anything is charged to it, and
    thousands of those slowed the machine. v1: ``memory.force_empty``; v2:
    ``memory.reclaim`` of what ``memory.current`` says. Best effort: what
    cannot be reclaimed now (EBUSY, EAGAIN) is left to the kernel."""
    if (path / "memory.force_empty").exists():
        with contextlib.suppress(OSError):
            _write(path / "memory.force_empty", "0")
    elif (path / "memory.reclaim").exists():
        for _ in range(3):
            current = _read_int(path / "memory.current")
            if current <= 0:
                break
            with contextlib.suppress(OSError):
                _write(path / "memory.reclaim", str(current))


def remove_groups(paths: list[Path], timeout: float = 5.0) -> list[Path]:
    """Kill whatever still runs in the groups, then remove them (deepest first;
    one that can be frozen before the others, as it ends its processes by
    construction). Return the groups still there at the deadline: the kernel
    answers EBUSY until the last killed process of a group has been released,
    which took longer than 5 s with 1,024 sandboxes torn down at a load of 250;
    the caller retries those later (:class:`.reaper.Reaper`). Any other error
    is raised."""
    deadline = time.monotonic() + timeout
    left: list[Path] = []
    for path in sorted(paths, key=lambda p: (-len(p.parts), not freezer.can_freeze(p))):
        while path.exists():
            freezer.kill_group(path)
            reclaim(path)
            try:
                path.rmdir()
            except FileNotFoundError:
                break
            except OSError as e:
                if e.errno != errno.EBUSY:
                    raise
                if time.monotonic() > deadline:
                    left.append(path)
                    break
                time.sleep(0.005)
    return left
