"""``POST /v1/weights`` over real HTTP, with the transformers backend and a tiny model."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from megaflow.model.config import TransformersModelConfig
from megaflow.model.factory import make_model_service
from megaflow.model.gateway import GatewayServer
from megaflow.model.transformers_lm import build_tiny_model
from megaflow.rpc.auth import BearerAuthMiddleware, check_bearer

TOKEN = "weights-test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CHAT = {"model": "default", "messages": [{"role": "user", "content": "test the code"}]}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return (
        build_tiny_model(tmp_path_factory.mktemp("gw-a"), seed=0),
        build_tiny_model(tmp_path_factory.mktemp("gw-b"), seed=1),
    )


@pytest.fixture
async def gateway(models: tuple[Path, Path]) -> AsyncIterator[GatewayServer]:
    """Deployed as ``megaflow serve-model`` does: the whole app behind the token, and
    the weights route checking it too."""
    service = make_model_service(TransformersModelConfig(model=str(models[0]), max_new_tokens=8))
    async with GatewayServer(
        service,
        wrap=functools.partial(BearerAuthMiddleware, token=TOKEN),
        authorize=functools.partial(check_bearer, token=TOKEN),
    ) as gw:
        yield gw


async def _chat(http: httpx.AsyncClient, url: str, **extra: Any) -> dict[str, Any]:
    response = await http.post(f"{url}/chat/completions", json={**CHAT, **extra}, headers=AUTH)
    assert response.status_code == 200, response.text
    ext: dict[str, Any] = response.json()["megaflow"]
    return ext


@pytest.mark.slow
async def test_weights_update_over_http(gateway: GatewayServer, models: tuple[Path, Path]) -> None:
    url = gateway.base_url
    update = {"path": str(models[1]), "version": 1}
    async with httpx.AsyncClient(timeout=60) as http:
        for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"}):
            refused = await http.post(f"{url}/weights", json=update, headers=headers)
            assert refused.status_code == 401
        old = await _chat(http, url, max_tokens=40)
        assert old["weights_version"] == 0
        assert old["prompt_token_ids"]
        # A long generation in flight when the update arrives finishes on the old weights.
        in_flight = asyncio.create_task(_chat(http, url, max_tokens=40))
        while gateway.service.router.outstanding == 0 and not in_flight.done():  # noqa: ASYNC110
            await asyncio.sleep(0.005)  # no event to wait on; a turn already over fails below
        assert not in_flight.done()
        answer = await http.post(f"{url}/weights", json=update, headers=AUTH)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["version"] == 1
        assert [b["weights_version"] for b in body["backends"]] == [1]
        assert gateway.service.router.outstanding == 0  # the update waited for it
        finished = await in_flight
        assert finished["weights_version"] == 0
        assert finished["token_ids"] == old["token_ids"]
        new = await _chat(http, url, max_tokens=40)
        assert new["weights_version"] == 1
        assert new["token_ids"] != old["token_ids"]
        stale = await http.post(f"{url}/weights", json=update, headers=AUTH)
        assert stale.status_code == 400
        assert "not newer" in stale.json()["error"]["message"]
        bad = await http.post(f"{url}/weights", json={"path": str(models[1])}, headers=AUTH)
        assert bad.status_code == 400
        assert "version" in bad.json()["error"]["message"]
        absent = {"path": str(models[1] / "absent"), "version": 2}
        missing = await http.post(f"{url}/weights", json=absent, headers=AUTH)
        assert missing.status_code == 400
        assert "does not exist" in missing.json()["error"]["message"]
    assert gateway.service.router.replicas[0].backend.weights_version == 1


async def test_a_gateway_without_a_token_refuses_every_weights_update() -> None:
    from megaflow.model.config import ReplayModelConfig

    async with GatewayServer(make_model_service(ReplayModelConfig())) as gw:
        async with httpx.AsyncClient() as http:
            answer = await http.post(
                f"{gw.base_url}/weights", json={"path": "/x", "version": 1}, headers=AUTH
            )
        assert answer.status_code == 401
        assert "without a token" in answer.json()["error"]["message"]
        assert gw.service.router.replicas[0].backend.weights_version == 0
