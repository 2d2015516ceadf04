"""``megaflow sandbox gc`` run from another pid namespace removes nothing live.

Seen from a pid namespace of its own (``unshare --pid``, or a container
sharing the host's cgroups and ``/run``), every host process looks gone. A
reaper that judged the host's process keys there removed every live
sandbox's cgroups and staged views on the host (a test that ran gc this way
took other tests' sandboxes down with it). Process keys now carry their pid
namespace, and a key of another namespace is not judged.

The second test is the gc's count of the stray processes the marker sweep
killed; its strays and its gc run in a pid namespace of their own, so no
other sweep on the host can take or add to the count (and, with the first
test's defence, its gc leaves the host's sandboxes alone).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.local import LocalRuntime, records
from megaflow.environment.local.userns import STAGE_ROOT


def _in_own_pid_namespace(*argv: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.fail("unshare (util-linux) is needed for a pid namespace of the test's own")
    return subprocess.run(
        [unshare, "--pid", "--fork", "--mount-proc", sys.executable, *argv],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


GC = "import sys; from megaflow.cli.main import app; app(['sandbox', 'gc', '--root', sys.argv[1]])"


async def test_gc_from_another_pid_namespace_leaves_a_live_sandbox(local: LocalRuntime) -> None:
    sb = await local.create(EnvironmentSpec())
    try:
        assert sb.cgroup is not None
        groups = sb.cgroup.paths()
        stages = sorted(STAGE_ROOT.glob(f"{local.process}/*"))
        done = _in_own_pid_namespace("-c", GC, str(local.root))
        assert done.returncode == 0, done.stdout + done.stderr
        assert "removed 0 orphaned sandbox(es)" in done.stdout, done.stdout
        assert all(p.is_dir() for p in groups), groups
        assert sorted(STAGE_ROOT.glob(f"{local.process}/*")) == stages
        assert (local.sandbox_root / sb.id).is_dir()
        result = await sb.exec("echo still here")
        assert result.stdout.strip() == "still here", result
    finally:
        await sb.destroy()


def test_only_keys_of_this_pid_namespace_are_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    ns = records.pid_namespace()
    assert records.process_key().endswith(f".{ns}")
    assert records.key_alive(records.process_key())
    assert not records.key_alive(f"999999999.1.{ns}")  # this namespace's, gone
    assert records.key_alive(f"999999999.1.{ns + 1}")  # another namespace's: not judged
    # an older version's key (no namespace) is judged from the initial pid namespace only
    monkeypatch.setattr(records, "pid_namespace", lambda: records.INIT_PID_NS)
    assert not records.key_alive("999999999.1")
    monkeypatch.setattr(records, "pid_namespace", lambda: records.INIT_PID_NS + 1)
    assert records.key_alive("999999999.1")


STRAYS = textwrap.dedent("""
    import subprocess, sys
    from typer.testing import CliRunner
    from megaflow.cli.main import app
    from megaflow.environment.local import sweep

    def stray(sandbox_id):
        ns = sweep.pid_namespace()
        env = {sweep.MARKER: f"{ns}/999999999.1.{ns}/{sandbox_id}"}
        code = "import time; print('up', flush=True); time.sleep(120)"
        p = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE)
        assert p.stdout.readline() == b"up\\n"
        return p

    left = [stray("abc"), stray("def")]
    for _ in range(2):
        gc = CliRunner().invoke(app, ["sandbox", "gc", "--root", sys.argv[1]])
        print(f"exit {gc.exit_code}: {gc.output}", flush=True)
    print("strays ended:", [p.wait(10) for p in left])
""")


def test_gc_counts_the_processes_the_sweep_killed(tmp_path: Path) -> None:
    done = _in_own_pid_namespace("-c", STRAYS, str(tmp_path / "local"))
    assert done.returncode == 0, done.stdout + done.stderr
    pattern = r"exit (\d+): removed (\d+) orphaned sandbox\(es\); killed (\d+) stray sandbox"
    counts = [tuple(map(int, m)) for m in re.findall(pattern, done.stdout)]
    # the first gc removed no sandbox (none was left) and killed both strays; the second, nothing
    assert counts == [(0, 0, 2), (0, 0, 0)], done.stdout
    assert "strays ended: [-9, -9]" in done.stdout
