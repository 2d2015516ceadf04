"""Start, kill and restart ``megaflow serve SERVICE`` processes for the reliability tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import yaml

from megaflow.rpc.config import ClusterConfig, Service
from megaflow.rpc.health import check_health

CLI = [sys.executable, "-m", "megaflow.cli.main"]


class Served:
    """``megaflow serve`` processes of one cluster config; all stopped at the end."""

    def __init__(self, tmp: Path, cfg: dict[str, Any]) -> None:
        self.tmp = tmp
        self.path = tmp / "cluster.yaml"
        self.path.write_text(yaml.safe_dump(cfg))
        self.cfg = ClusterConfig.model_validate(cfg)
        self.token = self.cfg.auth.resolve()
        self.procs: list[subprocess.Popen[bytes]] = []

    async def start(self, service: Service) -> subprocess.Popen[bytes]:
        n = len(self.procs)
        with open(self.tmp / f"{service}-{n}.log", "wb") as log:
            proc = subprocess.Popen(
                [*CLI, "serve", service, "--config", str(self.path)],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        self.procs.append(proc)
        try:
            await check_health(self.cfg, service, self.token, 60)
        except Exception as exc:
            raise AssertionError(f"{service} did not start: {self.log(service, n)}") from exc
        return proc

    def log(self, service: Service, n: int) -> str:
        return (self.tmp / f"{service}-{n}.log").read_text(errors="replace")[-3000:]

    @staticmethod
    def kill(proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL the service and everything in its process group."""
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    self.kill(proc)


@contextmanager
def served(tmp: Path, cfg: dict[str, Any]) -> Iterator[Served]:
    s = Served(tmp, cfg)
    try:
        yield s
    finally:
        s.stop_all()
