"""The reaper's marker sweep ends exactly the processes a dead maker left.

Real processes carry the marker in the environment they were started with;
the sweep must kill those whose maker is gone, even after they cleared their
environment, and leave alone a live maker's, another pid namespace's, and
unmarked ones.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from megaflow.environment.local import sweep
from megaflow.environment.local.records import key_alive, pid_namespace, process_key

DEAD = f"999999999.1.{pid_namespace()}"  # no such pid: a maker that is gone


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for p in procs:
        p.kill()
        p.wait()
        if p.stdout is not None:
            p.stdout.close()


def _sleeper(procs: list[subprocess.Popen[bytes]], env: dict[str, str]) -> subprocess.Popen[bytes]:
    # it clears its environment and then sleeps: /proc/<pid>/environ still
    # holds what it was started with (until it execs)
    code = (
        "import os,time; os.unsetenv('MEGAFLOW_SANDBOX'); os.environ.clear();"
        "print('cleared', flush=True); time.sleep(60)"
    )
    p = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE)
    procs.append(p)
    assert p.stdout is not None
    assert p.stdout.readline() == b"cleared\n"
    return p


def test_the_sweep_kills_a_dead_makers_processes_only(
    started: list[subprocess.Popen[bytes]],
) -> None:
    ns = sweep.pid_namespace()
    orphan = _sleeper(started, {sweep.MARKER: f"{ns}/{DEAD}/abc"})
    owned = _sleeper(started, {sweep.MARKER: sweep.marker(process_key(), "def")})
    foreign = _sleeper(started, {sweep.MARKER: f"{ns + 1}/{DEAD}/ghi"})
    plain = _sleeper(started, {})
    assert sweep.maker_of(orphan.pid, ns) == DEAD
    assert sweep.maker_of(foreign.pid, ns) is None
    killed = sweep.sweep(lambda key: key == process_key() or key_alive(key))
    assert killed >= 1
    assert orphan.wait(10) == -9
    for p in (owned, foreign, plain):
        assert p.poll() is None, p.args
