"""Engines a training run starts itself (``model.launch``) and stops when it ends.

::

    async with launched_engines(cfg, run_id, say) as cfg:   # cfg now points at them
        ...

With ``model: {type: openai, weight_sync: megaflow, launch: {replicas: N}}``
the run starts ``N`` processes of ``megaflow serve model``, each serving the
train policy with the ``transformers`` backend on two free loopback ports
(gRPC control, HTTP gateway). The bearer token is generated here and reaches
the engines through their environment only; each engine's config (without
the token) and its log (mode 0600) go in ``launch.dir``, beside
``engines.json`` (pids and addresses). The block returns once every engine
answers its authenticated health check, with the run's config pointed at
them; an engine that exits or stays silent past ``start_timeout_s`` is a
config error naming the field, with the end of its log.

No engine outlives the run: each runs in a process group of its own, which
gets SIGTERM and, after ``stop_grace_s``, SIGKILL when the block ends,
whether the run finished, failed or was interrupted. On Linux each engine
also asks the kernel for SIGKILL when the process that started it dies, so
even a run killed with SIGKILL leaves none behind; that signal follows the
thread that started the engine, so this must run on the event loop's own
thread (it does: no ``to_thread`` here).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from megaflow.config.models import RunConfig
from megaflow.core.errors import ConfigError
from megaflow.model.config import OpenAIModelConfig
from megaflow.model.launch_config import EngineLaunchConfig
from megaflow.rpc.config import RESERVED_PORTS, ClusterConfig
from megaflow.rpc.health import check_health
from megaflow.storage.private import private_dir, private_file

TOKEN_ENV = "MEGAFLOW_ENGINE_TOKEN"
PROGRAM = "from megaflow.cli.main import main; main()"
PR_SET_PDEATHSIG = 1


@dataclass(slots=True)
class Engine:
    """One engine process the run started."""

    proc: subprocess.Popen[bytes]
    cluster: ClusterConfig
    log: Path

    @property
    def url(self) -> str:
        return self.cluster.model.base_url()


def free_port() -> int:
    """A free loopback TCP port that a cluster config accepts."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port: int = s.getsockname()[1]
        if port not in RESERVED_PORTS:
            return port
    raise ConfigError("no free loopback port for an engine", [("model.launch", "no port")])


def _die_with_parent(parent: int) -> Callable[[], None]:
    """Run in the child before exec: SIGKILL when the parent dies (Linux)."""

    def arm() -> None:
        if sys.platform.startswith("linux"):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != parent:  # the parent died before the request took hold
                os._exit(1)

    return arm


def _log_tail(path: Path, lines: int = 15) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


def engine_dir(cfg: RunConfig, launch: EngineLaunchConfig, run_id: str) -> Path:
    if launch.dir is not None:
        return Path(launch.dir)
    out = cfg.train.out_dir if cfg.train is not None else ".megaflow/train"
    return Path(out) / run_id / "engines"


def _start_one(model: Path, launch: EngineLaunchConfig, where: Path, token: str) -> Engine:
    private_dir(where)
    raw = {
        "auth": {"token_env": TOKEN_ENV},
        "state_dir": str(where.absolute()),
        "model": {
            "port": free_port(),
            "http_port": free_port(),
            "config": {
                "type": "transformers",
                "model": str(model.absolute()),
                "max_new_tokens": launch.max_new_tokens,
                "update_in_flight": launch.update_in_flight,
            },
        },
    }
    (where / "cluster.yaml").write_text(yaml.safe_dump(raw))
    log = where / "engine.log"
    with os.fdopen(private_file(log), "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", PROGRAM, "serve", "model", "-c", "cluster.yaml"],
            cwd=where,
            env={**os.environ, TOKEN_ENV: token},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent(os.getpid()),  # only prctl and getppid: fork-safe
        )
    return Engine(proc, ClusterConfig.model_validate(raw), log)


async def _healthy(engine: Engine, token: str, timeout: float) -> None:
    """Return once ``engine`` answers its health check; ConfigError if it exits or
    stays silent past ``timeout`` seconds."""
    check = asyncio.create_task(check_health(engine.cluster, "model", token, timeout))
    try:
        while not check.done():
            if engine.proc.poll() is not None:
                raise ConfigError(
                    f"model.launch: the engine at {engine.url} exited with code "
                    f"{engine.proc.returncode} before answering; last lines of {engine.log}:\n"
                    f"{_log_tail(engine.log)}",
                    [("model.launch", "an engine exited at start")],
                )
            await asyncio.wait({check}, timeout=0.1)
        check.result()
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(
            f"model.launch.start_timeout_s: the engine at {engine.url} (pid {engine.proc.pid}) "
            f"did not answer its health check within {timeout:g}s ({exc}); last lines of "
            f"{engine.log}:\n{_log_tail(engine.log)}",
            [("model.launch.start_timeout_s", "an engine did not come up in time")],
        ) from exc
    finally:
        check.cancel()
        with contextlib.suppress(BaseException):
            await check


def stop_engines(engines: list[Engine], grace: float) -> None:
    """SIGTERM each engine's process group, then SIGKILL what is left after ``grace``
    seconds; waits for every engine to exit. Blocking on purpose: it runs also while
    the run is being cancelled."""
    for e in engines:
        if e.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(e.proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(e.proc.poll() is None for e in engines):
        time.sleep(0.05)
    for e in engines:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(e.proc.pid, signal.SIGKILL)  # also any child the engine left behind
        with contextlib.suppress(subprocess.TimeoutExpired):
            e.proc.wait(grace)


@contextlib.asynccontextmanager
async def launched_engines(
    cfg: RunConfig, run_id: str, say: Callable[[str], None], policy: Path
) -> AsyncIterator[RunConfig]:
    """``cfg`` itself unless its model has ``launch``; else the engines started,
    healthy, and ``cfg`` pointed at them; they are stopped when the block ends."""
    model = cfg.model
    if not isinstance(model, OpenAIModelConfig) or model.launch is None:
        yield cfg
        return
    launch = model.launch
    served = Path(launch.model) if launch.model is not None else policy
    if not served.is_dir():
        raise ConfigError(
            f"model.launch.model: {served} is not a model directory",
            [("model.launch.model", "no such directory")],
        )
    where = engine_dir(cfg, launch, run_id)
    token = secrets.token_urlsafe(32)
    engines: list[Engine] = []
    try:
        for i in range(launch.replicas):
            engines.append(_start_one(served, launch, where / f"engine-{i}", token))
        (where / "engines.json").write_text(
            json.dumps(
                {"pids": [e.proc.pid for e in engines], "urls": [e.url for e in engines]},
                indent=2,
            )
        )
        await asyncio.gather(*(_healthy(e, token, launch.start_timeout_s) for e in engines))
        say(
            f"engines: {len(engines)} started ({', '.join(e.url for e in engines)}), "
            f"pids {' '.join(str(e.proc.pid) for e in engines)}, logs in {where}"
        )
        urls = [e.url for e in engines]
        yield cfg.model_copy(update={"model": model.launched(urls, token)})
    finally:
        stop_engines(engines, launch.stop_grace_s)
        if engines:
            say(f"engines: {len(engines)} stopped")
