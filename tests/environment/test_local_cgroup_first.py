"""A local sandbox's processes start inside its cgroups and carry its marker.

The process that becomes bubblewrap joins the sandbox's groups before it
execs anything (``SandboxCgroup.joining``), so no process of the sandbox
ever runs outside them, even for an instant a crash could fall into; and a
group the reaper removed meanwhile stops the start before anything runs.
The chaos test of a kill at any point of a start is
``tests/reliability/test_sandbox_start_kill.py``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from megaflow.environment.abstract import EnvironmentSpec, SandboxResources
from megaflow.environment.local import LocalRuntime, cgroups, sweep
from megaflow.environment.local.records import process_key


def _environ(pid: int) -> list[bytes]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        return f.read().split(b"\0")


async def test_every_process_of_a_sandbox_is_in_its_cgroups_with_its_marker(
    local: LocalRuntime,
) -> None:
    sb = await local.create(EnvironmentSpec())
    try:
        assert sb.cgroup is not None
        assert sb.proc is not None
        marker = f"{sweep.MARKER}={sweep.marker(local.process, sb.id)}".encode()
        members = sb.cgroup.pids_in()
        # bubblewrap, the sandbox's init and the exec server, in every group
        assert sb.proc.pid in members, members
        assert len(members) == 3, members
        for path in sb.cgroup.paths():
            assert cgroups.pids_in([path]) == members, path
        for pid in members:
            assert marker in _environ(pid), (pid, _environ(pid))
        # the exec server's commands get their own environment, not the marker
        result = await sb.exec("env")
        assert sweep.MARKER not in result.stdout
    finally:
        await sb.destroy()


def test_the_join_runs_the_command_inside_the_groups_or_not_at_all(tmp_path: Path) -> None:
    layout = cgroups.detect("auto")
    assert layout is not None
    key = process_key()
    group = layout.create(key, "join-test", SandboxResources())
    try:
        ran = subprocess.run(
            group.joining(["/bin/cat", "/proc/self/cgroup"]),
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        # "<n>:<controllers>:<path>" per hierarchy, as the kernel placed the command
        joined = {
            controller
            for _, controllers, path in (line.split(":", 2) for line in ran.stdout.splitlines())
            if path.endswith(f"/{cgroups.GROUP}/{key}/join-test")
            for controller in controllers.split(",")
        }
        assert joined >= (set(layout.mounts) if layout.version == 1 else {""}), ran.stdout
    finally:
        group.remove()
    marker = tmp_path / "ran"
    gone = subprocess.run(
        group.joining(["/bin/touch", str(marker)]),
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert gone.returncode == 125, gone
    assert not marker.exists()
