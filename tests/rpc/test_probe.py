"""The health probe the Kubernetes manifests run, against a real gRPC server; the token
from an environment variable (``auth.token_env``)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from megaflow.core.errors import ConfigError
from megaflow.rpc.config import AuthConfig
from megaflow.rpc.probe import main
from megaflow.rpc.server import RpcServer

TOKEN = "probe-token-0123456789abcdef"


async def _probe(
    argv: list[str], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The probe in a child process (its own event loop, as in a pod), off this loop,
    which serves the server it calls."""
    run = [sys.executable, "-m", "megaflow.rpc.probe", *argv]
    return await asyncio.to_thread(
        subprocess.run, run, capture_output=True, text=True, timeout=60, env=env
    )


def _config(tmp_path: Path, port: int, env: str = "MF_TEST_TOKEN") -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"auth": {"token_env": env}, "environment": {"port": port}}))
    return path


async def _server(name: str) -> RpcServer:
    server = RpcServer(TOKEN, port=0)
    server.add(lambda _: None, name)
    await server.start()
    if server.port in range(10002, 20000):  # the config refuses Ray's worker range
        await server.stop()
        pytest.fail(f"the OS gave port {server.port} in 10002-19999; widen ip_local_port_range")
    return server


async def test_probe_answers_for_a_healthy_service_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MF_TEST_TOKEN", TOKEN)
    server = await _server("environment")
    try:
        run = ["environment", "--config", str(_config(tmp_path, server.port))]
        ok = await _probe(run)
        assert (ok.returncode, ok.stderr) == (0, "")
        wrong = await _probe(run, env={"MF_TEST_TOKEN": "another-token-0123456789"})
        assert wrong.returncode == 1
        assert "UNAUTHENTICATED" in wrong.stderr
    finally:
        await server.stop()
    down = await _probe(run)
    assert down.returncode == 1
    assert "UNAVAILABLE" in down.stderr


async def test_probe_names_another_service_and_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MF_TEST_TOKEN", TOKEN)
    server = await _server("model")
    try:
        cfg = _config(tmp_path, server.port)
        other = await _probe(["environment", "--config", str(cfg)])
        assert other.returncode == 1
        assert "serves ['model'], not environment" in other.stderr
    finally:
        await server.stop()
    monkeypatch.delenv("MF_TEST_TOKEN")
    assert main(["environment", "--config", str(cfg)]) == 2
    assert "$MF_TEST_TOKEN, which is not set" in capsys.readouterr().err
    assert main(["environment", "--config", str(tmp_path / "missing.yaml")]) == 2
    with pytest.raises(SystemExit) as bad:
        main(["nonsense", "--config", str(cfg)])
    assert bad.value.code == 2


def test_token_env_is_checked_like_a_token_file(monkeypatch: pytest.MonkeyPatch) -> None:
    auth = AuthConfig(token_env="MF_TEST_TOKEN", token_file="/nonexistent/token")
    monkeypatch.setenv("MF_TEST_TOKEN", f" {TOKEN}\n")
    assert auth.resolve() == TOKEN  # before token_file, trimmed like a file's line
    monkeypatch.setenv("MF_TEST_TOKEN", "short")
    with pytest.raises(ConfigError, match="at least 16"):
        auth.resolve()
    assert AuthConfig(token="explicit-token-0123456789", token_env="MF_TEST_TOKEN").resolve() == (
        "explicit-token-0123456789"
    )
