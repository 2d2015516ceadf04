"""Shared parts of the store-fault tests: a PostgreSQL cluster that can be
SIGKILLed and restarted, the small graded job they run, and the checks.

The job is the mini-SWE set (gold replay in the main arm, empty replay in the
control arm) on local bubblewrap sandboxes, run by a real ``megaflow run``
process. The checks: the process exits by itself with 0 and prints no
traceback, every gold sample is SUCCEEDED with reward 1.0 and every control
sample with reward 0, each task ran exactly once (one attempt), and the books
add up (:func:`~tests.reliability.ledger.check_ledger`).
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from megaflow.core.states import TaskState
from megaflow.storage.abstract import MetadataStore
from tests.fixtures.servers import IN_CI, free_port, need_binary, spawn, stop, wait_until
from tests.fixtures.sql_servers import _cluster_owner, find_postgres_bindir
from tests.reliability.ledger import check_ledger, read_ledger

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "megaflow.cli.main"]
LIMIT = 4
"""mini-SWE instances per arm."""


def graded_job(tmp: Path, storage: dict[str, Any], **over: Any) -> dict[str, Any]:
    """The mini-SWE job: gold main arm, empty control arm, local sandboxes."""
    cfg: dict[str, Any] = {
        "name": "storefault",
        "samples": 1,
        "max_attempts": 3,
        "tasks": {"type": "swebench", "path": str(REPO / "tasks/mini-swe"), "limit": LIMIT},
        "agent": {"type": "builtin", "max_steps": 10},
        "model": {"type": "replay", "play": "gold"},
        "control": {"model": {"type": "replay", "play": "empty"}},
        "expect": {"min_resolved": 1.0, "max_control_resolved": 0.0},
        "environment": {"runtime": {"type": "local", "root": str(tmp / "sb")}},
        "scheduler": {"max_concurrency": 2, "retry": {"base_s": 0.2, "max_s": 1.0}},
        "storage": {
            "metadata": {"type": "sqlite", "path": str(tmp / "m.db")},
            "artifacts": {"type": "local", "root": str(tmp / "art")},
            "outage": {"deadline_s": 90, "backoff_max_s": 1.0, "spool_dir": str(tmp / "spool")},
            **storage,
        },
    }
    cfg.update(over)
    return cfg


class RunProcess:
    """``megaflow run`` in its own process group, its output in a file."""

    def __init__(self, tmp: Path, cfg: dict[str, Any] | None, *args: str) -> None:
        """Runs ``cfg`` (written to ``tmp/run.yaml``), or with ``cfg`` None, ``args``."""
        path = tmp / "run.yaml"
        if cfg is not None:
            path.write_text(yaml.safe_dump(cfg))
        self.log = tmp / f"run-{len(list(tmp.glob('run-*.log')))}.log"
        env = {**os.environ, "COLUMNS": "200"}
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [*CLI, "run", *(args or (str(path),))], stdout=out, stderr=subprocess.STDOUT,
                env=env, start_new_session=True,
            )  # fmt: skip

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> None:
        assert self.proc.poll() is None, f"the run ended early:\n{self.output[-3000:]}"

    def wait(self, timeout: float) -> int:
        """The exit status; a run that does not exit by itself in time is a hang."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
            raise AssertionError(
                f"the run did not exit within {timeout} s:\n{self.output[-3000:]}"
            ) from None

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)


def until(ok: Any, what: str, timeout: float, run: RunProcess | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        if run is not None:
            run.alive()
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.1)


async def check_graded_books(md: MetadataStore, output: str) -> None:
    """Every gold sample rewarded 1.0, every control sample 0, each task run once,
    the books consistent, no traceback printed."""
    runs = await md.list_runs()
    assert len(runs) == 2, [r.id for r in runs]
    for run in runs:
        control = run.id.endswith("-control")
        led = await read_ledger(md, run.id)
        check_ledger(led, LIMIT)
        assert led.states == {TaskState.SUCCEEDED: LIMIT}, (run.id, led.states)
        for tid, res in led.results.items():
            assert res.reward == (0.0 if control else 1.0), (tid, res)
            assert res.error_kind is None, (tid, res)
            assert len(led.attempts[tid]) == 1, (tid, led.attempts[tid])  # nothing ran twice
            if not control:
                assert {"patch", "grade", "trajectory"} <= set(res.artifacts), res.artifacts
    assert "Traceback" not in output, output[-4000:]


# -- PostgreSQL that can be killed ------------------------------------------------
@dataclass
class KillablePostgres:
    bindir: Path
    data: Path
    owner: str | None
    port: int

    @property
    def dsn(self) -> str:
        return f"postgresql://megaflow@127.0.0.1:{self.port}/postgres"

    def _as_owner(self, *cmd: str) -> None:
        full = list(cmd) if self.owner is None else ["runuser", "-u", self.owner, "--", *cmd]
        done = subprocess.run(full, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(full)} failed: {done.stdout}\n{done.stderr}")

    def start(self) -> None:
        log = self.data.parent / "log"
        self._as_owner(
            str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(log), "-w", "-t", "60",
            "start",
        )  # fmt: skip

    def sigkill(self) -> None:
        """SIGKILL the postmaster and every backend it forked: a crash, not a stop."""
        pid = int((self.data / "postmaster.pid").read_text().split()[0])
        victims = [pid] + [
            int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _ppid(p) == pid
        ]
        for v in victims:
            try:
                os.kill(v, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while any(Path(f"/proc/{v}").exists() for v in victims) and time.monotonic() < deadline:
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop the server if it runs (after a kill it does not)."""
        pidfile = self.data / "postmaster.pid"
        if not pidfile.exists() or not Path(f"/proc/{pidfile.read_text().split()[0]}").exists():
            return
        self._as_owner(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                       "-w", "stop")  # fmt: skip


def _ppid(proc: Path) -> int:
    try:
        return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


@contextmanager
def killable_postgres() -> Iterator[KillablePostgres]:
    """A PostgreSQL cluster of this test's own (the session's shared one must not
    be killed), on a free loopback port."""
    bindir = find_postgres_bindir()
    if bindir is None:
        message = "PostgreSQL server binaries (initdb, pg_ctl) not found"
        if IN_CI:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    owner = _cluster_owner()
    root = Path(tempfile.mkdtemp(prefix="megaflow-pgkill-"))
    if owner is not None:
        entry = pwd.getpwnam(owner)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    pg = KillablePostgres(bindir, root / "data", owner, free_port())
    try:
        pg._as_owner(str(bindir / "initdb"), "-D", str(pg.data), "-U", "megaflow", "-A", "trust",
                     "-E", "UTF8", "--no-locale", "--no-sync")  # fmt: skip
        with (pg.data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"\nlisten_addresses = '127.0.0.1'\nport = {pg.port}\n"
                "unix_socket_directories = ''\nfsync = off\nfull_page_writes = off\n"
            )
        pg.start()
        yield pg
    finally:
        try:
            pg.stop()
        finally:
            shutil.rmtree(root, ignore_errors=True)


def sqlite_succeeded(db: Path) -> int:
    """Tasks SUCCEEDED in a SQLite metadata file another process writes."""
    if not db.exists():
        return 0
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            row = conn.execute("SELECT count(*) FROM tasks WHERE state = 'succeeded'").fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return 0
    return int(row[0])


# -- an S3 server that can be killed -------------------------------------------------
class KillableMoto:
    """``moto_server`` on a fixed loopback port: SIGKILLed, then started again on
    the same port (empty: moto keeps its buckets in memory)."""

    def __init__(self, workdir: Path) -> None:
        self.binary = need_binary("moto_server", "pip install 'moto[server]'")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = self.workdir / f"moto-{self.port}.log"
        cmd = [self.binary, "-H", "127.0.0.1", "-p", str(self.port)]
        proc = self.proc = spawn(cmd, log, self.workdir)

        def answers() -> bool:
            try:
                with urllib.request.urlopen(self.url + "/moto-api/", timeout=2):
                    return True
            except urllib.error.HTTPError:
                return True
            except OSError:
                return False

        wait_until(answers, "moto_server", proc, 60, log)

    def sigkill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc)


# -- a disk that fills up ------------------------------------------------------------
@contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` at ``path`` (mounting needs root, as CI has)."""
    if os.geteuid() != 0:
        if IN_CI:
            pytest.fail("mounting a tmpfs needs root", pytrace=False)
        pytest.skip("mounting a tmpfs needs root")
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def fill(disk: Path) -> Path:
    """Fill ``disk`` to the last byte with one file (a real ENOSPC for everyone else)."""
    filler = disk / "filler"
    chunk = b"\0" * (1 << 20)
    with filler.open("wb", buffering=0) as f:
        try:
            while True:
                f.write(chunk)
        except OSError:
            pass
        for size in (65536, 4096, 1):  # the last partial blocks
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError:
                pass
    return filler
