"""The busybox root filesystem: deterministic bytes and a working shell."""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from megaflow.core.errors import SandboxStartError
from megaflow.environment.rootfs import build_busybox_rootfs, file_digest, is_static_elf


def test_rootfs_is_deterministic(tmp_path: Path) -> None:
    a = build_busybox_rootfs(tmp_path / "a.tar")
    b = build_busybox_rootfs(tmp_path / "b" / "b.tar")
    assert file_digest(a) == file_digest(b)
    with tarfile.open(a) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert members["bin/busybox"].isfile()
    assert members["bin/busybox"].mode == 0o755
    for applet in ("bin/sh", "bin/ls", "bin/cat", "bin/echo", "bin/sleep"):
        assert members[applet].issym()
        assert members[applet].linkname == "/bin/busybox"
    assert members["tmp"].mode == 0o1777
    assert all(m.mtime == 0 and m.uid == 0 for m in members.values())
    assert not list(tmp_path.glob("**/.*.tmp"))


def test_rootfs_shell_runs(tmp_path: Path) -> None:
    tar = build_busybox_rootfs(tmp_path / "rootfs.tar")
    root = tmp_path / "root"
    root.mkdir()
    with tarfile.open(tar) as t:
        t.extractall(root, filter="tar")
    out = subprocess.run(
        [str(root / "bin" / "busybox"), "sh", "-c", "echo hello; ls /bin >/dev/null && echo ok"],
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    )
    assert out.stdout.split() == ["hello", "ok"]


def test_dynamic_binary_is_refused(tmp_path: Path) -> None:
    python = Path(shutil.which("python3") or "/usr/bin/python3").resolve()
    assert not is_static_elf(python)
    assert is_static_elf(Path("/bin/busybox").resolve())
    with pytest.raises(SandboxStartError, match="does not exist"):
        build_busybox_rootfs(tmp_path / "x.tar", busybox=tmp_path / "missing")
