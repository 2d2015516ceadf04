"""Tokens: stored 0600, compared whole, refused when unsafe."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from megaflow.core.errors import ConfigError
from megaflow.rpc.auth import (
    check_bearer,
    generate_token,
    load_or_create_token,
    read_token,
    write_token,
)
from megaflow.rpc.paths import confine


def test_token_file_is_0600_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        path = tmp_path / "d" / "token"
        token = load_or_create_token(path)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create_token(path) == token
    assert read_token(path) == token


def test_existing_wide_file_is_tightened_on_write_and_refused_on_read(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("x")
    path.chmod(0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        read_token(path)
    write_token(path, generate_token())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_weak_or_missing_tokens_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="at least"):
        write_token(tmp_path / "t", "short")
    with pytest.raises(ConfigError, match="megaflow up"):
        read_token(tmp_path / "absent")


def test_check_bearer() -> None:
    token = generate_token()
    assert check_bearer(f"Bearer {token}", token)
    assert not check_bearer(None, token)
    assert not check_bearer("", token)
    assert not check_bearer(token, token)
    assert not check_bearer(f"Bearer {token}x", token)
    assert not check_bearer(f"Bearer {token[:-1]}", token)
    assert not check_bearer(f"Basic {token}", token)
    assert generate_token() != token


@pytest.mark.parametrize(
    ("path", "expected"),
    [("a.txt", "/workspace/a.txt"), ("/workspace", "/workspace"), ("x/../y", "/workspace/y"),
     ("/workspace/sub/./f", "/workspace/sub/f"), (".", "/workspace"),
     ("/tmp/gold.patch", "/tmp/gold.patch"), ("../tmp/x", "/tmp/x")],
)  # fmt: skip
def test_confine_accepts_paths_inside(path: str, expected: str) -> None:
    assert confine(path, "/workspace") == expected


@pytest.mark.parametrize(
    "path",
    [
        "/etc/passwd",
        "..",
        "../workspace2",
        "/workspace2/x",
        "a/../../b",
        "",
        "a\x00b",
        "/tmpx",
        "/tmp/../etc/shadow",
        "/proc/1/environ",
        "/",
    ],
)
def test_confine_refuses_paths_outside(path: str) -> None:
    with pytest.raises(ValueError):
        confine(path, "/workspace")


async def test_http_middleware_answers_401_and_never_calls_the_app() -> None:
    import httpx

    from megaflow.rpc.auth import BearerAuthMiddleware

    token = generate_token()
    reached: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["path"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    transport = httpx.ASGITransport(app=BearerAuthMiddleware(app, token))
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        denied = await client.post("/v1/chat/completions", json={})
        assert denied.status_code == 401
        assert denied.headers["www-authenticate"] == "Bearer"
        wrong = await client.get("/v1/models", headers={"Authorization": f"Bearer {token}x"})
        assert wrong.status_code == 401
        assert reached == []
        ok = await client.get("/v1/models", headers={"Authorization": f"Bearer {token}"})
        assert (ok.status_code, ok.text) == (200, "ok")
        assert reached == ["/v1/models"]
