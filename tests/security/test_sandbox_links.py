"""Host-side work on a sandbox's files never follows a link the sandbox planted.

The victim is a root-only directory (0700) holding a root-only file (0600)
outside any sandbox. A planted symlink pointing at it, swapped in for a
directory right between the host listing a directory and using an entry of
it, made the path-based restore, snapshot and chown (kept here as ``old_*``)
overwrite the file, change its mode and owner, or copy it into the snapshot
(from where a reset hands it to the sandbox). The swap is made exactly there
(a hook on ``os.scandir``), first against the old code, which it breaks,
then against the current one. Then a process inside a live sandbox plants
such links in a loop while the host snapshots, restores and chowns.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.local import LocalRuntime, workspace
from megaflow.environment.local.records import remove_sandbox_dir
from tests.environment.conftest import leak_check, local

__all__ = ["leak_check", "local"]

AGENT = (101000, 101000)


@dataclass
class Victim:
    dir: Path
    secret: Path
    token: bytes

    def state(self) -> tuple[Any, ...]:
        def facts(p: Path) -> tuple[int, int, int]:
            st = p.lstat()
            return st.st_mode, st.st_uid, st.st_gid

        return sorted(os.listdir(self.dir)), facts(self.dir), facts(self.secret), self.read()

    def read(self) -> bytes:
        return self.secret.read_bytes() if self.secret.exists() else b""


@pytest.fixture
def victim(tmp_path: Path) -> Iterator[Victim]:
    assert os.geteuid() == 0, "the host side runs as root"
    d = tmp_path / "victim"
    d.mkdir(mode=0o700)
    token = b"TOPSECRET-" + secrets.token_hex(8).encode()
    (d / "secret").write_bytes(token)
    (d / "secret").chmod(0o600)
    v = Victim(d, d / "secret", token)
    before = v.state()
    yield v
    assert v.state() == before, "the victim changed"


def sandbox_dir(tmp_path: Path, snap: bool = False) -> Path:
    """A sandbox directory as the runtime makes it (no sandbox running)."""
    box = tmp_path / "box"
    workspace.make_dirs(box, AGENT)
    if snap:
        (box / "snap").mkdir(mode=0o700)
        for part in workspace.RW_PARTS:
            (box / "snap" / part).mkdir()
    return box


class _Listing:
    """What ``os.scandir`` returns, over entries read before the swap."""

    def __init__(self, entries: list[os.DirEntry[str]]) -> None:
        self.entries = iter(entries)

    def __iter__(self) -> _Listing:
        return self

    def __next__(self) -> os.DirEntry[str]:
        return next(self.entries)

    def __enter__(self) -> _Listing:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def close(self) -> None:
        pass


def swap_after(
    mp: pytest.MonkeyPatch, call: str, watch: Path, swap: Callable[[], None]
) -> list[int]:
    """Right after the first ``os.scandir`` of ``watch`` (by path or descriptor),
    or the first ``os.mkdir`` that makes ``watch``, run ``swap`` before the
    caller goes on. Returns a list that counts the swaps."""
    real = getattr(os, call)
    done: list[int] = []

    def same(st: os.stat_result, other: Path) -> bool:
        ref = other.stat()
        return (st.st_dev, st.st_ino) == (ref.st_dev, ref.st_ino)

    def scandir(arg: Any = ".") -> Any:
        st = os.fstat(arg) if isinstance(arg, int) else os.stat(arg)
        if done or not same(st, watch):
            return real(arg)
        with real(arg) as it:
            entries = list(it)
        for e in entries:  # what the listing knew, as the kernel's listing would
            e.is_dir(follow_symlinks=False)
            e.is_symlink()
        swap()
        done.append(1)
        return _Listing(entries)

    def mkdir(path: Any, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        real(path, mode, dir_fd=dir_fd)
        if dir_fd is None:
            made = Path(path) == watch
        else:
            made = str(path) == watch.name and same(os.fstat(dir_fd), watch.parent)
        if made and not done:
            swap()
            done.append(1)

    mp.setattr(os, call, scandir if call == "scandir" else mkdir)
    return done


def planted_link(where: Path, target: Path) -> Callable[[], None]:
    """Move what is at ``where`` aside (if anything) and put a link to ``target`` there."""

    def swap() -> None:
        if where.exists() and not where.is_symlink():
            where.rename(where.with_name(where.name + ".moved"))
        os.symlink(target, where)

    return swap


# -- the host-side code before this change, for the effect the attack had --
def old_copy_owned(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, symlinks=True, dirs_exist_ok=True)
    for dirpath, dirnames, filenames in os.walk(src):
        rel = os.path.relpath(dirpath, src)
        for name in [".", *dirnames, *filenames]:
            st = os.lstat(os.path.join(dirpath, name))
            os.lchown(os.path.normpath(os.path.join(dst, rel, name)), st.st_uid, st.st_gid)


def old_restore(box: Path) -> None:
    for part in workspace.RW_PARTS:
        for entry in os.scandir(box / "rw" / part):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        old_copy_owned(box / "snap" / part, box / "rw" / part)


def old_snapshot(box: Path) -> None:
    (box / "snap").mkdir(mode=0o700, exist_ok=True)
    for part in workspace.RW_PARTS:
        old_copy_owned(box / "rw" / part, box / "snap" / part)


def old_chown_tree(root: Path, owner: tuple[int, int]) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            os.lchown(os.path.join(dirpath, name), *owner)


def path_based_remove(root: Path) -> None:
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            os.unlink(os.path.join(dirpath, name))


# -- each host operation, with the swap at its worst moment --
@dataclass
class Case:
    where: str  # the tree the host reads: "snap" (restore) or "rw"
    call: str  # after which call on ``watch`` the swap happens
    watch: str  # below the sandbox directory
    link: str  # what becomes a link to the victim ("d" to its directory, else its file)
    old: Callable[[Path], None] | None  # None: the old code was not caught by this one
    new: Callable[[Path], None]


def _chown(box: Path) -> None:
    workspace.chown_tree(box / "rw" / "ws", AGENT)


def _empty_and_remove(box: Path) -> None:
    workspace.restore(box)  # no snapshot: it only empties
    remove_sandbox_dir(box)


CASES = {
    "restore: a directory's name": Case(
        "snap", "scandir", "snap/ws", "rw/ws/d", old_restore, workspace.restore
    ),
    "restore: a file's name": Case(
        "snap", "scandir", "snap/ws", "rw/ws/secret", old_restore, workspace.restore
    ),
    "restore: a directory just made": Case(
        "snap", "mkdir", "rw/ws/d", "rw/ws/d", old_restore, workspace.restore
    ),
    "snapshot: inside a directory": Case(
        "rw", "scandir", "rw/ws/d", "rw/ws/d", old_snapshot, workspace.snapshot
    ),
    "snapshot: at a directory's name": Case(
        "rw", "scandir", "rw/ws", "rw/ws/d", old_snapshot, workspace.snapshot
    ),
    "chown: inside a directory": Case(
        "rw", "scandir", "rw/ws/d", "rw/ws/d",
        lambda box: old_chown_tree(box / "rw" / "ws", AGENT), _chown,
    ),
    "chown: at a directory's name": Case("rw", "scandir", "rw/ws", "rw/ws/d", None, _chown),
    "remove: inside a directory": Case(
        "rw", "scandir", "rw/ws/d", "rw/ws/d",
        lambda box: path_based_remove(box / "rw" / "ws"),
        _empty_and_remove,
    ),
}  # fmt: skip


def _prepare(tmp_path: Path, case: Case, victim: Victim) -> tuple[Path, Path, Callable[[], None]]:
    box = sandbox_dir(tmp_path, snap=case.where == "snap")
    top = box / case.where / "ws"
    (top / "d").mkdir()
    inside = ["new"] if case.call == "mkdir" else ["secret"]  # "new": not refused by O_EXCL
    for f in [top / "secret", *(top / "d" / n for n in inside)]:
        f.write_bytes(b"the agent's")
        f.chmod(0o644)
        os.chown(f, *AGENT)
    if case.call == "mkdir":  # made by the operation itself
        with contextlib.suppress(FileNotFoundError):
            (box / case.watch).rmdir()
    target = victim.dir if case.link.endswith("/d") else victim.secret
    return box, box / case.watch, planted_link(box / case.link, target)


def _effect(victim: Victim, box: Path) -> bool:
    """Whether the victim changed or its secret reached the snapshot."""
    snap = box / "snap"
    leaked = snap.exists() and any(
        victim.token in p.read_bytes() for p in snap.rglob("*") if p.is_file()
    )
    st = victim.secret.lstat() if victim.secret.exists() else None
    top = victim.dir.lstat()
    changed = st is None or (st.st_mode & 0o777, st.st_uid) != (0o600, 0)
    changed = changed or (top.st_mode & 0o777, top.st_uid) != (0o700, 0)
    return leaked or changed or victim.read() != victim.token


@pytest.mark.parametrize("name", list(CASES))
def test_a_link_swapped_in_mid_operation_is_not_followed(
    name: str, tmp_path: Path, victim: Victim, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = CASES[name]
    if case.old is not None:  # where the defence does not apply: the old code follows it
        saved = victim.state()
        box, watch, swap = _prepare(tmp_path / "old", case, victim)
        swaps = swap_after(monkeypatch, case.call, watch, swap)
        with contextlib.suppress(OSError):
            case.old(box)
        monkeypatch.undo()
        assert swaps == [1]
        assert _effect(victim, box), f"the old code was not caught by {name!r}"
        _put_back(victim, saved)
    box, watch, swap = _prepare(tmp_path / "new", case, victim)
    swaps = swap_after(monkeypatch, case.call, watch, swap)
    with contextlib.suppress(OSError):  # refusing (an existing name) is fine
        case.new(box)
    monkeypatch.undo()
    assert swaps == [1]  # the link was planted, pointing at the victim
    assert not _effect(victim, box)


def _put_back(victim: Victim, saved: tuple[Any, ...]) -> None:
    victim.dir.chmod(0o700)
    os.chown(victim.dir, 0, 0)
    victim.secret.write_bytes(victim.token)
    victim.secret.chmod(0o600)
    os.chown(victim.secret, 0, 0)
    for name in os.listdir(victim.dir):
        if name != "secret":
            (victim.dir / name).unlink()
    assert victim.state() == saved


PLANTER = r"""
import os, sys
victim, roots = sys.argv[1], sys.argv[2:]
print("planting", flush=True)
while True:
    for root in roots:
        for i in range(4):
            d = f"{root}/d{i}"
            try:
                os.rename(d, d + ".x")
                os.symlink(victim, d)
                os.unlink(d)
                os.rename(d + ".x", d)
            except OSError:
                try:
                    os.symlink(victim, d)
                except OSError:
                    pass
"""


async def test_a_planting_process_races_every_host_operation(
    local: LocalRuntime, victim: Victim
) -> None:
    files = {f"d{i}/secret": "the agent's\n" for i in range(4)}
    setup = ["for r in /tmp /root; do for i in 0 1 2 3; do mkdir $r/d$i; "
             "echo x > $r/d$i/secret; done; done"]  # fmt: skip
    async with await local.create(EnvironmentSpec(files=files, setup=setup)) as sb:
        await sb.exec(
            ["sh", "-c", 'setsid python3 -c "$0" "$@" >/dev/null 2>&1 &', PLANTER,
             str(victim.dir), "/workspace", "/tmp", "/root"],
        )  # fmt: skip
        rw = sb.dir / "rw"
        seen = set()
        for _ in range(2000):  # the planting works: links inside point at the victim
            for part in ("ws", "tmp", "home"):
                with contextlib.suppress(OSError):
                    if os.readlink(rw / part / "d0") == str(victim.dir):
                        seen.add(part)
            if len(seen) == 3:
                break
            await asyncio.sleep(0.001)
        assert seen == {"ws", "tmp", "home"}
        for _ in range(15):
            for work in (
                lambda: workspace.snapshot(sb.dir),
                lambda: workspace.restore(sb.dir),
                lambda: workspace.chown_tree(rw / "ws", AGENT),
            ):
                with contextlib.suppress(Exception):  # refusing is fine, following is not
                    await asyncio.to_thread(work)
            assert not _effect(victim, sb.dir)
        got = await sb.exec(f"grep -r {victim.token.decode()} /tmp /root /workspace")
        assert victim.token.decode() not in got.stdout
        assert stat.S_IMODE(victim.dir.stat().st_mode) == 0o700
