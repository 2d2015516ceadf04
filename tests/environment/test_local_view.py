"""The local runtime's prepared read-only root: one per image, bound whole into each sandbox."""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import pytest

from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.local import LocalRuntime, LocalSandbox
from megaflow.environment.local.records import process_key
from megaflow.environment.local.userns import STAGE_ROOT

pytestmark = pytest.mark.skipif(os.getuid() != 0, reason="views are mounted by root only")
# Mounts each start makes itself; everything else comes from the view.
PER_START = {"/proc", "/dev", "/tmp", "/root", "/workspace"}


def bwrap_args(sb: LocalSandbox) -> list[str]:
    assert sb.proc is not None
    return Path(f"/proc/{sb.proc.pid}/cmdline").read_text().split("\0")


async def mount_table(sb: LocalSandbox) -> list[tuple[str, str, str]]:
    """(mount point, per-mount options, filesystem source) of each mount in the sandbox."""
    out = (await sb.exec(["cat", "/proc/self/mountinfo"])).stdout
    rows = []
    for line in out.splitlines():
        left, _, right = line.partition(" - ")
        fields = left.split()
        rows.append((fields[4], fields[5], right.split()[1]))
    return rows


async def test_sandboxes_of_an_image_share_one_view(local: LocalRuntime) -> None:
    a = await local.create(EnvironmentSpec())
    b = await local.create(EnvironmentSpec())
    try:
        views = set()
        for sb in (a, b):
            args = bwrap_args(sb)
            root = args[args.index("/") - 1]
            assert args[args.index("/") - 2] == "--ro-bind"
            views.add(root)
            assert "--remount-ro" not in args
            assert "--symlink" not in args
            binds = [x for x in args if x in ("--ro-bind", "--bind", "--tmpfs", "--proc", "--dev")]
            assert len(binds) == 6, args  # the view, /proc, /dev and three writable binds
        assert len(views) == 1
        assert views.pop().startswith(str(STAGE_ROOT / process_key()))
    finally:
        await a.destroy()
        await b.destroy()


async def test_everything_but_the_sandboxs_own_mounts_is_read_only(local: LocalRuntime) -> None:
    async with await local.create(EnvironmentSpec()) as sb:
        table = await mount_table(sb)
        points = {point for point, _, _ in table}
        assert {"/", "/usr", "/etc", "/etc/shadow", "/etc/ssh"} <= points
        for point, options, _ in table:
            if point in PER_START or point.startswith(("/dev/", "/proc/")):
                continue
            assert options.split(",")[0] == "ro", (point, options)
            assert {"nosuid", "nodev"} <= set(options.split(",")), (point, options)
        assert (await sb.exec(["cat", "/etc/shadow"])).stdout == ""
        wrote = await sb.exec(["sh", "-c", "echo x > /etc/ssh/x || echo x > /x"])
        assert not wrote.ok
        ok = await sb.exec(["sh", "-c", "echo hi > /tmp/a && echo hi > ~/b && echo hi > c"])
        assert ok.ok, ok.stderr


async def test_a_root_filesystem_image_gets_its_own_view(
    local: LocalRuntime, rootfs_tar: Path
) -> None:
    host = await local.create(EnvironmentSpec())
    box = await local.create(EnvironmentSpec(image=str(rootfs_tar)))
    try:
        assert (
            bwrap_args(host)[bwrap_args(host).index("/") - 1]
            != (bwrap_args(box)[bwrap_args(box).index("/") - 1])
        )
        assert (await box.exec(["sh", "-c", "busybox | head -1"])).stdout.startswith("BusyBox")
        assert (await box.exec(["test", "-e", "/etc/shadow"])).exit_code != 0
        assert not (await box.exec(["sh", "-c", "echo x > /bin/x"])).ok
    finally:
        await host.destroy()
        await box.destroy()


async def test_stop_unmounts_the_views(tmp_path: Path) -> None:
    from tests.environment.conftest import local_runtime

    rt = local_runtime(tmp_path)
    await rt.start()
    try:
        async with await rt.create(EnvironmentSpec()):
            pass
        mine = str(STAGE_ROOT / process_key())
        assert any("-view" in p for p in _mounts(mine))
        # prepared read-only, nosuid and nodev on the host, so bubblewrap's bind of
        # the view remounts none of its mounts (one mount call for the whole root)
        with open("/proc/self/mountinfo") as f:
            in_view = [line.split() for line in f if "-view" in line.split()[4]]
        assert len(in_view) > 5
        for fields in in_view:
            assert fields[5].split(",")[:3] == ["ro", "nosuid", "nodev"], fields[4:6]
    finally:
        await rt.stop()
    assert not any("-view" in p for p in _mounts(mine))


def _mounts(below: str) -> list[str]:
    with open("/proc/self/mountinfo") as f:
        return [p for p in (line.split()[4] for line in f) if p.startswith(below)]


async def test_an_image_evicted_and_unpacked_again_gets_a_fresh_view(
    tmp_path: Path, rootfs_tar: Path
) -> None:
    from tests.environment.conftest import local_runtime

    other = tmp_path / "other.tar"
    other.write_bytes(rootfs_tar.read_bytes())
    with tarfile.open(other, "a") as tar:
        tar.add(__file__, arcname="extra.py")
    rt = local_runtime(tmp_path, image_cache_mb=1)  # room for the image in use only
    await rt.start()
    try:
        for image in (rootfs_tar, other, rootfs_tar):  # each evicts the one before
            async with await rt.create(EnvironmentSpec(image=str(image))) as sb:
                assert len(rt.images.entries()) == 1
                shown = await sb.exec(["sh", "-c", "busybox echo ok; ls /extra.py"])
                assert shown.stdout.startswith("ok\n"), shown.stderr
                assert ("/extra.py" in shown.stdout) == (image == other)
    finally:
        await rt.stop()
