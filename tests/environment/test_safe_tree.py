"""safe_tree: what the host copies, empties and chowns comes out right.

(That it follows no link is tests/security/test_sandbox_links.py.)
"""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from megaflow.core.errors import SandboxError
from megaflow.environment.local import safe_tree, workspace

A, B = (101000, 101000), (101001, 101002)


def _tree(root: Path) -> None:
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "pkg").chmod(0o750)
    (root / "pkg" / "mod.py").write_text("x = 1\n")
    (root / "pkg" / "mod.py").chmod(0o640)
    (root / "tool").write_text("#!/bin/sh\n")
    (root / "tool").chmod(0o4755)  # setuid: dropped in copies
    (root / "pkg" / "sub" / "deep").write_bytes(b"\0" * 70_000)
    os.link(root / "tool", root / "hard")
    os.symlink("/etc/passwd", root / "abs")
    os.symlink("pkg/mod.py", root / "rel")
    os.symlink("missing", root / "dangling")
    os.mkfifo(root / "fifo", 0o600)
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(root / "sock"))
    os.chown(root / "pkg", *A)
    os.chown(root / "pkg" / "mod.py", *B)
    os.chown(root / "rel", *B, follow_symlinks=False)
    os.utime(root / "pkg" / "mod.py", ns=(1_000_000_000, 2_000_000_000))


def _facts(root: Path) -> dict[str, tuple[object, ...]]:
    out: dict[str, tuple[object, ...]] = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        kind = stat.S_IFMT(st.st_mode)
        data = path.read_bytes() if stat.S_ISREG(st.st_mode) else os.readlink(path) if (
            stat.S_ISLNK(st.st_mode)) else b""  # fmt: skip
        mtime = st.st_mtime_ns if not stat.S_ISDIR(st.st_mode) else 0
        out[str(path.relative_to(root))] = (kind, stat.S_IMODE(st.st_mode), st.st_uid, data, mtime)
    return out


def test_copy_keeps_content_modes_owners_times_and_links(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    _tree(src)
    with safe_tree.opened(src) as s, safe_tree.opened(dst) as d:
        safe_tree.copy_tree(s, d)
    want = {k: v for k, v in _facts(src).items() if k != "sock"}  # sockets are not copied
    want["tool"] = (*want["tool"][:1], 0o755, *want["tool"][2:])  # no setuid bit
    want["hard"] = want["tool"]  # a hard link becomes a file of its own
    assert _facts(dst) == want
    assert not os.path.samefile(dst / "tool", dst / "hard")


def test_copy_gives_every_entry_the_owner_asked_for(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    _tree(src)
    with safe_tree.opened(src) as s, safe_tree.opened(dst) as d:
        safe_tree.copy_tree(s, d, owner=B)
    assert {facts[2] for facts in _facts(dst).values()} == {B[0]}


def test_copy_refuses_a_name_that_exists(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    (src / "f").write_text("new")
    (dst / "f").write_text("old")
    with safe_tree.opened(src) as s, safe_tree.opened(dst) as d, pytest.raises(FileExistsError):
        safe_tree.copy_tree(s, d)
    assert (dst / "f").read_text() == "old"


def test_clear_and_chown(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    _tree(root)
    (root / "locked").mkdir()
    (root / "locked" / "f").write_text("x")
    (root / "locked").chmod(0)
    with safe_tree.opened(root) as fd:
        safe_tree.chown_tree(fd, B)
    assert {facts[2] for facts in _facts(root).values()} == {B[0]}
    assert root.stat().st_uid == 0  # the root itself is not changed
    with safe_tree.opened(root) as fd:
        safe_tree.clear(fd)
    assert list(root.iterdir()) == []


def test_a_tree_too_deep_is_refused(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    dst.mkdir()
    deep = src
    for _ in range(safe_tree.MAX_DEPTH + 2):
        deep = deep / "d"
    deep.mkdir(parents=True)
    with safe_tree.opened(src) as s, safe_tree.opened(dst) as d:
        with pytest.raises(SandboxError, match="deeper than"):
            safe_tree.copy_tree(s, d)
        with pytest.raises(SandboxError, match="deeper than"):
            safe_tree.clear(s)


def test_a_file_is_copied_up_to_its_size_when_opened(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x" * 100)
    src = os.open(tmp_path / "f", os.O_RDONLY)
    dst = os.open(tmp_path / "g", os.O_WRONLY | os.O_CREAT)
    try:
        with open(tmp_path / "f", "ab") as f:
            f.write(b"y" * 100)  # grows after it was looked at
        safe_tree._copy_data(src, dst, 100)
    finally:
        os.close(src)
        os.close(dst)
    assert (tmp_path / "g").read_bytes() == b"x" * 100


def test_restore_puts_back_modes_and_drops_attributes(tmp_path: Path) -> None:
    box = tmp_path / "box"
    rw = workspace.make_dirs(box, A)
    (rw / "ws" / "kept").write_text("setup")
    workspace.snapshot(box)
    for part in workspace.RW_PARTS:
        (rw / part / "new").write_text("task")
        (rw / part).chmod(0o700)
        os.setxattr(rw / part, "user.task", b"1")
    (rw / "ws" / "kept").write_text("changed")
    workspace.restore(box)
    assert sorted(p.name for p in (rw / "ws").iterdir()) == ["kept"]
    assert (rw / "ws" / "kept").read_text() == "setup"
    for part, mode in workspace.PART_MODES.items():
        assert stat.S_IMODE((rw / part).stat().st_mode) == mode, part
        assert (rw / part).stat().st_uid == A[0]
        assert os.listxattr(rw / part) == []
    (box / "snap").rename(box / "no-snap")  # a sandbox without a snapshot: emptied only
    (rw / "tmp" / "x").write_text("task")
    (rw / "tmp").chmod(0o700)
    workspace.restore(box)
    assert list((rw / "tmp").iterdir()) == []
    assert stat.S_IMODE((rw / "tmp").stat().st_mode) == 0o1777
