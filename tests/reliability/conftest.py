"""Reliability suite fixtures: a leak check around every test, and shared helpers.

The leak check reuses the environment suite's probes (``descendants``,
``our_cgroups``, ``mounts``). Tests that start MegaFlow in other processes
(``megaflow run``, ``megaflow serve ...``) register those processes with
``leaks.watch(pid)``, so that the cgroups those processes created are
checked too, even after the process itself was killed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from megaflow.environment.local.cgroups import GROUP
from megaflow.environment.local.records import process_key
from tests.environment.conftest import CGROUP_ROOT, descendants, mounts, our_cgroups

SANDBOX_PROCS = ("bwrap", "python3", "sh")


@dataclass
class LeakCheck:
    """What the test started, and the other MegaFlow processes it watches."""

    tmp: Path
    keys: list[str] = field(default_factory=list)

    def watch(self, pid: int) -> str:
        """Also check the cgroups of MegaFlow process ``pid``; returns its key."""
        key = process_key(pid)
        self.keys.append(key)
        return key

    def cgroups(self) -> list[Path]:
        found = list(our_cgroups())
        for key in self.keys:
            found += [p for p in CGROUP_ROOT.glob(f"*/{GROUP}/{key}/*") if p.is_dir()]
        return found

    def boxes(self) -> list[Path]:
        return [p for p in self.tmp.glob("**/boxes/*") if p.is_dir()]


@pytest.fixture(autouse=True)
def leaks(tmp_path: Path) -> Iterator[LeakCheck]:
    """No process, cgroup, mount or sandbox directory may outlive a test."""
    check = LeakCheck(tmp_path)
    before_mounts = mounts(tmp_path)
    before_procs = set(descendants(os.getpid()))
    yield check
    deadline = time.monotonic() + 10
    while True:
        procs = {
            pid: name
            for pid, name in descendants(os.getpid()).items()
            if pid not in before_procs and name in SANDBOX_PROCS
        }
        groups = check.cgroups()
        if (not procs and not groups) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not procs, f"processes leaked: {procs}"
    assert not groups, f"cgroups leaked: {groups}"
    assert mounts(tmp_path) - before_mounts == set(), "mounts leaked"
    assert not check.boxes(), f"sandbox directories leaked: {describe(check.boxes())}"


def describe(boxes: list[Path]) -> list[str]:
    """Each leaked sandbox directory with what it holds (its record names its maker)."""
    out = []
    for box in boxes:
        record = box / "record.json"
        held = sorted(p.name for p in box.iterdir())
        out.append(f"{box}: {held} {record.read_text() if record.is_file() else 'no record'}")
    return out
