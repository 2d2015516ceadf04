"""A sandbox left frozen by a maker that died mid-kill or mid-reset is reaped.

On cgroup v1 every controller is its own hierarchy. A frozen process cannot
die, so it cannot leave its cpu or memory group, until its freezer group is
thawed; the reaper that removed each hierarchy's groups in turn met the cpu
group first, waited for it to empty and failed with EBUSY, and every later
runtime start on the machine failed with it. Here a real process is put in
real v1 groups of an owner that is gone, frozen, and reaped.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from megaflow.environment.local import cgroups
from megaflow.environment.local.reaper import Reaper
from megaflow.environment.local.records import pid_namespace, process_key

FREEZER = Path("/sys/fs/cgroup/freezer")
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0
    or (not (FREEZER / "freezer.self_freezing").exists() and not FREEZER.is_dir()),
    reason="needs root and the v1 freezer",
)


def test_a_frozen_orphan_is_killed_and_all_its_groups_removed(tmp_path: Path) -> None:
    layout = cgroups.detect("auto")
    assert layout is not None
    assert layout.version == 1
    assert "freezer" in layout.mounts
    layout.prepare()
    # no such pid: a maker that is gone
    dead = f"999999999.{random.randrange(10**9)}.{pid_namespace()}"
    dirs = [layout.base(c) / dead / "frozen" for c in layout.mounts]
    for d in dirs:
        d.mkdir(parents=True)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    freezer = layout.base("freezer") / dead / "frozen"
    try:
        for d in dirs:
            (d / "cgroup.procs").write_text(str(child.pid))
        (freezer / "freezer.state").write_text("FROZEN")
        deadline = time.monotonic() + 10
        while (freezer / "freezer.state").read_text().strip() != "FROZEN":
            assert time.monotonic() < deadline, "the group did not freeze"
            time.sleep(0.01)

        Reaper(tmp_path, layout, process_key()).reap(set())

        assert child.wait(timeout=10) == -9
        assert not [d for d in dirs if d.exists()]
        assert not [c for c in layout.mounts if (layout.base(c) / dead).exists()]
    finally:
        if freezer.exists():
            (freezer / "freezer.state").write_text("THAWED")
        child.kill()
        child.wait()
        for d in dirs:
            for path in (d, d.parent):
                if path.exists():
                    path.rmdir()
