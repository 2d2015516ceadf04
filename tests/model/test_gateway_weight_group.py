"""The gateway's broadcast-group routes over real HTTP: behind the token (checked by
the routes themselves, not only by a middleware), and clear about bad requests."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from megaflow.model.config import TransformersModelConfig
from megaflow.model.factory import make_model_service
from megaflow.model.gateway import Authorize, GatewayServer
from megaflow.model.transformers_lm import build_tiny_model
from megaflow.rpc.auth import check_bearer

TOKEN = "group-routes-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
META = {"name": "transformer.wte.weight", "dtype": "float32", "shape": [2, 2], "bucket": 0}


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("gw-group"), seed=0)


async def serving(model: Path, authorize: Authorize | None) -> GatewayServer:
    service = make_model_service(TransformersModelConfig(model=str(model), max_new_tokens=4))
    return GatewayServer(service, authorize=authorize)  # no middleware: the routes decide


@pytest.fixture
async def gateway(model: Path) -> AsyncIterator[GatewayServer]:
    async with await serving(model, functools.partial(check_bearer, token=TOKEN)) as gw:
        yield gw


async def test_the_group_routes_need_the_token(gateway: GatewayServer) -> None:
    url = gateway.base_url
    async with httpx.AsyncClient(timeout=60) as http:
        for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"}):
            for method, route in [
                ("GET", "/weights/group"), ("POST", "/weights/group/init"),
                ("POST", "/weights/group/update"), ("POST", "/weights/group/close"),
            ]:  # fmt: skip
                refused = await http.request(method, url + route, json={}, headers=headers)
                assert refused.status_code == 401, (route, refused.text)
        ranks = await http.get(f"{url}/weights/group", headers=AUTH)
        assert ranks.json() == {"ranks": 1}


async def test_bad_group_requests_are_refused_with_the_reason(gateway: GatewayServer) -> None:
    url = gateway.base_url
    async with httpx.AsyncClient(timeout=60) as http:
        bad = await http.post(f"{url}/weights/group/update", json={"metas": []}, headers=AUTH)
        assert bad.status_code == 400
        assert "not a group update" in bad.json()["error"]["message"]
        bad = await http.post(f"{url}/weights/group/init", json={"master_port": 1}, headers=AUTH)
        assert bad.status_code == 400
        assert "master_address" in bad.json()["error"]["message"]
        early = await http.post(
            f"{url}/weights/group/update", json={"metas": [META], "version": 1}, headers=AUTH
        )
        assert early.status_code == 400, early.text
        assert "is in no weight-update group; join one first" in early.json()["error"]["message"]


async def test_a_gateway_without_a_token_takes_no_group_weights(model: Path) -> None:
    async with await serving(model, None) as gw, httpx.AsyncClient(timeout=60) as http:
        refused = await http.get(f"{gw.base_url}/weights/group", headers=AUTH)
    assert refused.status_code == 401
    assert "the gateway runs without a token" in refused.json()["error"]["message"]
