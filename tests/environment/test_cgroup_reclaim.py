"""A removed sandbox's memory group gives its memory back first, so the kernel can free it.

A removed memory cgroup stays in the kernel as long as page cache or slab is
charged to it; thousands of those slowed the machine. The host process here
writes and reads a file from inside a real v1 memory group (as a sandbox's
commands would), leaves it, and the group's charge is what
:func:`cgroups.reclaim` must give back.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from megaflow.environment.local import cgroups

MEMORY = Path("/sys/fs/cgroup/memory")
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not (MEMORY / "memory.force_empty").exists(),
    reason="needs root and the v1 memory controller",
)
WRITER = """
import os, sys
with open(sys.argv[1], "wb") as f:
    f.write(os.urandom(8 << 20))
with open(sys.argv[1], "rb") as f:
    f.read()
"""


@pytest.fixture
def group() -> Iterator[Path]:
    # not below megaflow/, where any runtime's reaper removes groups of no live process
    path = MEMORY / f"megaflow-test-reclaim-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    try:
        yield path
    finally:
        cgroups.remove_groups([path])


def charged(path: Path) -> int:
    return int((path / "memory.usage_in_bytes").read_text())


def fill(group: Path, file: Path) -> None:
    """Run a writer inside ``group`` that leaves 8 MiB of page cache charged to it."""
    code = f"open('{group}/cgroup.procs','w').write(str(__import__('os').getpid()))\n" + WRITER
    subprocess.run([sys.executable, "-c", code, str(file)], check=True)


def test_reclaim_gives_back_what_an_emptied_group_still_holds(group: Path, tmp_path: Path) -> None:
    fill(group, tmp_path / "data")
    assert not (group / "cgroup.procs").read_text().split()  # nothing runs in it
    assert charged(group) >= 6 << 20  # the page cache outlived the process
    cgroups.reclaim(group)
    assert charged(group) < 1 << 20


def test_removing_a_group_reclaims_it_first(
    group: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(group, tmp_path / "data")
    seen: list[int] = []
    real = cgroups.reclaim

    def watched(path: Path) -> None:
        real(path)
        seen.append(charged(path))

    monkeypatch.setattr(cgroups, "reclaim", watched)
    cgroups.remove_groups([group])
    assert not group.exists()
    assert seen
    assert seen[0] < 1 << 20  # emptied before the rmdir
