"""A cgroup the kernel still holds after a teardown is retried later, not raised.

With 1,024 sandboxes torn down at a load of 250, the kernel answered EBUSY to
the removal of a killed sandbox's freezer group for longer than the 5 s
teardown allows, and the OSError came out of ``destroy``: the run's teardown
crashed and the group was never removed, as the reaper removes only a dead
process's groups. The kernel's hold is made here the one way a test can make it
at will: a child group the host made inside the sandbox's memory group (its
removal is EBUSY while the child exists, as while a killed process is not yet
released). The teardown must finish (processes killed, directory removed), hand
the group to the runtime, and the runtime's next reap remove it once released.
"""

from __future__ import annotations

import os

import pytest

from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.local import LocalRuntime, cgroups

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for cgroups")


async def test_a_group_held_past_the_teardown_is_removed_by_the_next_reap(
    local: LocalRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = cgroups.remove_groups
    monkeypatch.setattr(cgroups, "remove_groups", lambda paths, timeout=5.0: real(paths, 0.2))
    sb = await local.create(EnvironmentSpec())
    assert sb.cgroup is not None
    assert (await sb.exec("sleep 300 & echo started")).stdout == "started\n"
    held = sb.cgroup.dirs["memory"]
    child = held / "held-by-the-kernel"
    child.mkdir()
    try:
        await local.destroy(sb.id)  # raised OSError(EBUSY) before
        assert sb.id not in local.sandboxes
        assert not sb.dir.exists()
        assert local.pending_groups == [held]
        # every process of the sandbox is gone: only the memory group is left, empty
        assert [p for p in sb.cgroup.paths() if p.exists()] == [held]
        assert not (held / "cgroup.procs").read_text().split()
        await local.reap_orphans()  # still held: kept for the next reap
        assert local.pending_groups == [held]
        assert held.exists()
    finally:
        child.rmdir()
    await local.reap_orphans()
    assert not held.exists()
    assert local.pending_groups == []
