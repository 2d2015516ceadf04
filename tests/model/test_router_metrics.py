"""The router's health on the model service's Prometheus ``/metrics``.

``megaflow serve model``'s gateway fronts two replicas with health checks: a
real engine (``megaflow serve model`` in its own process) and an address where
nothing answers. A scrape of the service's metrics port, with the cluster's
token, shows one replica in rotation, the dead one out with its failed probes
and its take-out counted, and the version each serves, which moves when the
live one takes new weights.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from megaflow.app.serve import serve
from megaflow.model.transformers_lm import build_tiny_model
from megaflow.rpc.auth import generate_token
from megaflow.rpc.config import ClusterConfig
from tests.fixtures.servers import free_port
from tests.model.test_health_engine import TOKEN, engine_process

pytestmark = pytest.mark.slow


def samples(text: str) -> dict[tuple[str, str], float]:
    """``(sample name, replica label)`` -> value, of the ``megaflow_model_*`` series."""
    out: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.startswith("megaflow_model_"):
                out[(s.name, s.labels.get("replica", ""))] = s.value
    return out


async def wait_for(check: Callable[[], Awaitable[bool]], timeout_s: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not await check():
        assert loop.time() < deadline, f"not true within {timeout_s}s"
        await asyncio.sleep(0.1)


async def test_the_router_health_is_scraped_from_the_model_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROUTER_METRICS_TOKEN", TOKEN)
    model = build_tiny_model(tmp_path / "model", seed=0)
    async with engine_process(model, tmp_path / "engine") as live:
        dead_url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
        live_name, dead_name = f"openai:{live.base_url}", f"openai:{dead_url}"
        metrics_port, http_port = free_port(), free_port()
        cfg = ClusterConfig.model_validate({
            "model": {
                "port": free_port(), "metrics_port": metrics_port, "http_port": http_port,
                "config": {
                    "type": "openai", "base_url": live.base_url, "replicas": [dead_url],
                    "model": "default", "api_key_env": "ROUTER_METRICS_TOKEN",
                    "weight_sync": "megaflow", "retries": 0,
                    "health": {"interval_s": 0.2, "timeout_s": 2, "failures": 2},
                },
            },
        })  # fmt: skip
        token = generate_token()
        stop = asyncio.Event()
        ready: list[str] = []
        server = asyncio.create_task(
            serve(["model"], cfg, token, stop, lambda s, _: ready.append(s))
        )
        auth = {"Authorization": f"Bearer {token}"}
        try:
            while not ready:
                assert not server.done(), server.exception()
                await asyncio.sleep(0.05)
            async with httpx.AsyncClient(timeout=30) as http:
                url = f"http://127.0.0.1:{metrics_port}/metrics"
                assert (await http.get(url)).status_code == 401  # behind the token
                seen: dict[tuple[str, str], float] = {}

                async def dead_is_out() -> bool:
                    nonlocal seen
                    seen = samples((await http.get(url, headers=auth)).text)
                    return seen.get(("megaflow_model_replica_take_outs_total", dead_name)) == 1

                await wait_for(dead_is_out, 30)
                assert seen[("megaflow_model_replicas_in_rotation", "")] == 1
                assert seen[("megaflow_model_replica_in_rotation", live_name)] == 1
                assert seen[("megaflow_model_replica_in_rotation", dead_name)] == 0
                assert seen[("megaflow_model_replica_probe_failures_total", dead_name)] >= 2
                assert seen[("megaflow_model_replica_probe_failures_total", live_name)] == 0
                assert seen[("megaflow_model_replica_take_outs_total", live_name)] == 0
                assert seen[("megaflow_model_replica_catching_up", dead_name)] == 0
                assert seen[("megaflow_model_replica_weights_version", live_name)] == 0

                took = await http.post(
                    f"http://127.0.0.1:{http_port}/v1/weights",
                    json={"path": str(model), "version": 1}, headers=auth,
                )  # fmt: skip
                assert took.status_code == 200, took.text
                now = samples((await http.get(url, headers=auth)).text)
                assert now[("megaflow_model_replica_weights_version", live_name)] == 1
                assert now[("megaflow_model_replica_weights_version", dead_name)] == 0
                assert now[("megaflow_model_replicas_in_rotation", "")] == 1
        finally:
            stop.set()
            await server
