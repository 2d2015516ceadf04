"""A development cluster on this machine: one process per service.

:func:`up` starts ``megaflow serve SERVICE`` for each servable service in its
own process group, logs to ``<state_dir>/<service>.log``, records the pids in
``<state_dir>/cluster.json`` and returns once every service answers an
authenticated health call (or stops what it started and raises).
:func:`down` stops the processes recorded there: SIGTERM, then SIGKILL after
a grace period. Only processes whose command line is a ``megaflow serve`` of
this cluster are signalled, so a recycled pid is left alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from megaflow.core.errors import TransportError
from megaflow.rpc.config import SERVABLE, ClusterConfig, Service
from megaflow.rpc.health import check_health
from megaflow.storage.private import private_dir, private_file

STATE_FILE = "cluster.json"
PROGRAM = "from megaflow.cli.main import main; main()"


@dataclass(frozen=True, slots=True)
class Member:
    service: str
    pid: int
    target: str
    log: str


def _command(service: Service, config_path: Path) -> list[str]:
    return [sys.executable, "-c", PROGRAM, "serve", service, "--config", str(config_path)]


def _is_ours(pid: int, config_path: str) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    words = [w.decode(errors="replace") for w in cmdline]
    return PROGRAM in words and "serve" in words and config_path in words


def _log_tail(path: str, lines: int = 20) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    return ""


def members(state_dir: Path) -> list[Member]:
    path = state_dir / STATE_FILE
    if not path.exists():
        return []
    return [Member(**m) for m in json.loads(path.read_text())["members"]]


def up(cfg: ClusterConfig, config_path: Path, token: str, timeout: float = 60.0) -> list[Member]:
    """Start every service of ``cfg``, in dependency order, each healthy before the next."""
    state = Path(cfg.state_dir)
    private_dir(state)
    config_path = config_path.absolute()
    if any(_is_ours(m.pid, str(config_path)) for m in members(state)):
        raise TransportError(f"a cluster from {config_path} is already up; run `megaflow down`")
    started: list[Member] = []
    try:
        for service in SERVABLE:
            log = state / f"{service}.log"
            with os.fdopen(private_file(log), "ab") as out:  # logs are 0600
                proc = subprocess.Popen(
                    _command(service, config_path),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            member = Member(service, proc.pid, cfg.endpoint(service).target, str(log))
            started.append(member)
            _write(state, config_path, started)
            # One at a time: a service is healthy before the next (which may call it) starts.
            asyncio.run(_healthy(cfg, member, proc, token, timeout))
    except BaseException:
        _stop(started, str(config_path))
        (state / STATE_FILE).unlink(missing_ok=True)
        raise
    return started


async def _healthy(
    cfg: ClusterConfig, m: Member, proc: subprocess.Popen[bytes], token: str, timeout: float
) -> None:
    check = asyncio.create_task(check_health(cfg, m.service, token, timeout))  # type: ignore[arg-type]
    while not check.done():
        if proc.poll() is not None:
            check.cancel()
            raise TransportError(
                f"the {m.service} service exited with code {proc.returncode}; "
                f"last lines of {m.log}:\n{_log_tail(m.log)}"
            )
        await asyncio.wait({check}, timeout=0.1)
    check.result()


def _write(state: Path, config_path: Path, started: list[Member]) -> None:
    data = {"config": str(config_path), "members": [dataclasses.asdict(m) for m in started]}
    (state / STATE_FILE).write_text(json.dumps(data, indent=2))


def _stop(started: list[Member], config_path: str, grace: float = 10.0) -> list[Member]:
    """Stop members newest first, each before the next, so that no service outlives
    what it calls (the scheduler before the agent before the environment)."""
    ours = [m for m in reversed(started) if _is_ours(m.pid, config_path)]
    for m in ours:
        with contextlib.suppress(ProcessLookupError):
            os.kill(m.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and _alive(m.pid):
            time.sleep(0.05)
        if _alive(m.pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(m.pid, signal.SIGKILL)
    return ours


def _alive(pid: int) -> bool:
    """True while ``pid`` runs; reaps it if it is our exited child."""
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    with contextlib.suppress(OSError):
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return False


def down(state_dir: Path, grace: float = 10.0) -> list[Member]:
    """Stop the cluster recorded in ``state_dir``; returns the members stopped."""
    path = state_dir / STATE_FILE
    if not path.exists():
        return []
    config_path = json.loads(path.read_text())["config"]
    stopped = _stop(members(state_dir), config_path, grace)
    path.unlink(missing_ok=True)
    return stopped
